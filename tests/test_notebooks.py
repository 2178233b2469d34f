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


@pytest.mark.slow
def test_runner_stops_at_first_failure_naming_notebook_and_cell(tmp_path):
    src = tmp_path / "nbs"
    src.mkdir()
    _nb(src, "01_ok.ipynb", "assert steps == 3, steps")
    _nb(src, "02_bad.ipynb", "x = 1", "raise ValueError('boom at ' + str(steps))")
    _nb(src, "03_never.ipynb", "pass")
    runs = run_workbook(tmp_path / "out", overrides={"steps": 3, "undeclared": 1}, echo=lambda *a: None, folder=src)
    assert [r.status for r in runs] == ["ok", "failed", "skipped"]
    assert "02_bad.ipynb" in runs[1].error and "cell 2" in runs[1].error and "boom at 3" in runs[1].error
    assert "undeclared" not in runs[0].parameters  # only declared parameters are passed
    index = (tmp_path / "out" / "index.md").read_text()
    assert "02_bad.ipynb" in index and "failed" in index and "skipped" in index
    assert NOTEBOOKS.name == "notebooks"
