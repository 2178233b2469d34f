"""No linker noise in a learner's notebook: DeepSpeed's op probe runs quietly in a real Jupyter kernel."""

import nbformat
import pytest


def _cell_output(tmp_path, code):
    import papermill as pm

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, tmp_path / "in.ipynb")
    pm.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), progress_bar=False)
    cell = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0]
    return "".join(o.get("text", "") for o in cell.outputs)


@pytest.mark.slow
def test_the_probe_prints_nothing_in_a_kernel(tmp_path):
    out = _cell_output(
        tmp_path,
        "from workshop.train.dsprobe import probe_deepspeed_ops\n"
        "ops = probe_deepspeed_ops()\n"
        "import deepspeed.ops\n"
        "assert deepspeed.ops.__compatible_ops__ is ops\n"
        "print('shm', ops['deepspeed_shm_comm'])",
    )
    assert "shm True" in out
    assert "collect2" not in out and "/usr/bin/ld" not in out, out


def test_compiled_ops_are_cached_per_deepspeed_version(monkeypatch, tmp_path):
    from importlib import metadata

    from workshop.train.dsprobe import extensions_dir

    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (
        extensions_dir()
        == tmp_path / ".cache" / "torch_extensions" / f"deepspeed-{metadata.version('deepspeed')}"
    )
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "mine"))
    assert extensions_dir() == tmp_path / "mine"  # a user's own choice wins
