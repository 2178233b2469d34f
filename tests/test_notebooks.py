"""Every notebook is executed with its small defaults (papermill, as `workshop run` does), and kept clean in git."""

import json
import re

import nbformat
import pytest

from workshop.runner import NOTEBOOKS, notebooks, run_notebook, run_workbook

ALL = notebooks()


def test_the_six_chapters_are_there():
    assert [p.name[:2] for p in ALL] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterized(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in code[0].get("metadata", {}).get("tags", []), "first code cell must be tagged parameters"
    assert not any(c.get("outputs") for c in code), "outputs must be stripped in git"
    source = "\n".join("".join(c["source"]) for c in nb["cells"])
    assert not re.search(r"/(root|home|tmp|work)/[\w.-]+", source), "no machine-specific absolute paths"
    params = "".join(code[0]["source"])
    assert "images_dir" in params and "out_dir" in params


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path):
    run = run_notebook(path, tmp_path, {})
    assert run.status == "ok", run.error
    assert run.images, "every chapter shows at least one figure it made"


def _nb(folder, name, *cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("images_dir = 'x'\nout_dir = 'y'\nsteps = 1", metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, folder / name)


def _three(tmp_path):
    src = tmp_path / "nbs"
    src.mkdir()
    _nb(src, "01_ok.ipynb", "assert steps == 3, steps")
    _nb(src, "02_bad.ipynb", "x = 1", "raise ValueError('boom at ' + str(steps))")
    _nb(src, "03_after.ipynb", "print('ran after the failure')")
    return src


@pytest.mark.slow
def test_runner_runs_every_notebook_and_names_the_failing_cell(tmp_path):
    runs = run_workbook(tmp_path / "out", overrides={"steps": 3}, echo=lambda *a: None, folder=_three(tmp_path))
    assert [r.status for r in runs] == ["ok", "failed", "ok"]
    assert "02_bad.ipynb" in runs[1].error and "cell 2" in runs[1].error and "boom at 3" in runs[1].error
    index = (tmp_path / "out" / "index.md").read_text()
    assert "02_bad.ipynb" in index and "boom at 3" in index and "failed" in index
    assert NOTEBOOKS.name == "notebooks"


@pytest.mark.slow
def test_runner_stop_on_failure_skips_the_rest(tmp_path):
    runs = run_workbook(tmp_path / "out", overrides={"steps": 3}, echo=lambda *a: None, folder=_three(tmp_path),
                        stop_on_failure=True)
    assert [r.status for r in runs] == ["ok", "failed", "skipped"]


def test_runner_refuses_a_parameter_no_notebook_declares(tmp_path):
    from workshop.errors import WorkshopError

    with pytest.raises(WorkshopError, match=r"'no_such_param' is declared by none.*steps \(01, 02, 03\)"):
        run_workbook(tmp_path / "out", overrides={"no_such_param": 5}, echo=lambda *a: None, folder=_three(tmp_path))
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written
