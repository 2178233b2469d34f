"""The notebooks themselves are executed by nbval (testpaths includes notebooks/, see pyproject.toml); these
tests keep them clean in git, check the papermill batch runner and the re-recording of checked outputs, and
check that the figures this session's notebooks made match the tracked images/."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from workshop.book import images, nbcheck
from workshop.cli import main as cli_main
from workshop.cli import notebooks as notebook_commands
from workshop.errors import WorkshopError
from workshop.launch.notebooks import NOTEBOOKS, notebooks, run_workbook

ALL = notebooks()
REPO = NOTEBOOKS.parent


def test_the_six_chapters_are_there():
    assert [p.name[:2] for p in ALL] == ["01", "02", "03", "04", "05", "06"]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterized(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in code[0].get("metadata", {}).get("tags", []), (
        "first code cell must be tagged parameters"
    )
    assert nbcheck.unexpected_outputs(nb) == [], "only # NBVAL_CHECK_OUTPUT cells keep outputs in git"
    checked = [c for c in code if nbcheck.is_checked(c)]
    assert checked, "every chapter checks at least one deterministic fact"
    assert all(c["outputs"] for c in checked), (
        "a checked cell without outputs: run `python -m workshop nbval refresh`"
    )
    source = "\n".join("".join(c["source"]) for c in nb["cells"])
    assert not re.search(r"/(root|home|tmp|work)/[\w.-]+", source), "no machine-specific absolute paths"
    outputs = json.dumps([c["outputs"] for c in checked])
    assert not re.search(r"/(root|home|tmp|work)/[\w.-]+", outputs), (
        "no machine-specific paths in checked outputs"
    )
    params = "".join(code[0]["source"])
    assert "images_dir" in params and "out_dir" in params
    # running the notebook (JupyterLab, nbval) writes figures into the untracked out/, never into images/
    assert images.default_images_dir(path).is_relative_to(REPO / "out")


KO = sorted((REPO / "notebooks-ko").glob("*.ipynb"))


@pytest.mark.parametrize("path", ALL + KO, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_papermill_reads_every_parameter(path, capfd):
    """papermill reads each `name = value  # help` line of the parameters cell (what `papermill
    --help-notebook` and the runner's unknown-parameter check see); a line it cannot parse (an `=` inside the
    comment) is printed as "Unable to parse line" in every run and the parameter is left out."""
    from papermill.translators import PythonTranslator

    cell = next(c for c in nbformat.read(path, 4).cells if "parameters" in c.metadata.get("tags", []))
    names = [p.name for p in PythonTranslator.inspect(cell)]
    assigned = [m.group(1) for m in re.finditer(r"^(\w+)\s*=", cell.source, re.M)]
    assert names == assigned, sorted(set(assigned) - set(names))
    assert "Unable to parse" not in "".join(capfd.readouterr())


def _nb(folder, name, *cells, checked=()):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "images_dir = 'x'\nout_dir = 'y'\nsteps = 1", metadata={"tags": ["parameters"]}
        )
    ]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.cells += [nbformat.v4.new_code_cell(f"# {nbcheck.MARKER}\n{c}") for c in checked]
    nbformat.write(nb, folder / name)
    return folder / name


def _three(tmp_path):
    src = tmp_path / "nbs"
    src.mkdir()
    _nb(src, "01_ok.ipynb", "assert steps == 3, steps")
    _nb(src, "02_bad.ipynb", "x = 1", "raise ValueError('boom at ' + str(steps))")
    _nb(
        src,
        "03_after.ipynb",
        "print('ran after the failure')",
        "import sys\nfrom workshop.launch.procs import run_captured\n"
        "run_captured([sys.executable, '-c', 'pass'])",
    )
    return src


@pytest.mark.slow
def test_runner_runs_every_notebook_and_names_the_failing_cell(tmp_path):
    runs = run_workbook(
        tmp_path / "out", overrides={"steps": 3}, echo=lambda *a: None, folder=_three(tmp_path)
    )
    assert [r.status for r in runs] == ["ok", "failed", "ok"]
    assert "02_bad.ipynb" in runs[1].error and "cell 2" in runs[1].error and "boom at 3" in runs[1].error
    index = (tmp_path / "out" / "index.md").read_text()
    assert "02_bad.ipynb" in index and "boom at 3" in index and "failed" in index
    assert NOTEBOOKS.name == "notebooks"
    # each chapter's launches are counted from its own ledger: none in 01, the one process 03 started
    assert runs[0].launches["launches"] == 0 and runs[2].launches["launches"] == 1
    assert "| ok | " in index and " | 1 (1, 0) | " in index


@pytest.mark.slow
def test_runner_stop_on_failure_skips_the_rest(tmp_path):
    runs = run_workbook(
        tmp_path / "out",
        overrides={"steps": 3},
        echo=lambda *a: None,
        folder=_three(tmp_path),
        stop_on_failure=True,
    )
    assert [r.status for r in runs] == ["ok", "failed", "skipped"]


def test_runner_refuses_a_parameter_no_notebook_declares(tmp_path):
    from workshop.errors import WorkshopError

    with pytest.raises(WorkshopError, match=r"'no_such_param' is declared by none.*steps \(01, 02, 03\)"):
        run_workbook(
            tmp_path / "out", overrides={"no_such_param": 5}, echo=lambda *a: None, folder=_three(tmp_path)
        )
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written


@pytest.mark.slow
def test_workshop_run_runs_the_korean_chapter_02_with_a_parameter_override(tmp_path, capsys):
    """Papermill stays the batch runner, in both languages, in ONE run (nbval already ran the English 02):
    `workshop run --lang ko --only 02 -p cluster_name ...` reaches the Korean notebook's cells (the override
    shows in the rendered NodeClass's discovery tags), the package prints Korean sentences (exercises.show,
    hardware.explain) and no English prose, YAML stays as it is, and the figure and the index are the English
    run's."""
    argv = ["run", "--out", str(tmp_path), "--lang", "ko", "--only", "02"]
    assert cli_main([*argv, "-p", "cluster_name", "override-took-effect"]) == 0
    said = capsys.readouterr().out
    # the command speaks Korean too, and the chapter printed no English prose (book.i18n_prose, issue #48)
    assert "노트북 1개 중 1개가" in said and "영어 문장 검사: 찾은 것 없음" in said, said[-3000:]
    executed = nbformat.read(tmp_path / "notebooks" / "02_karpenter_setup.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and 'cluster_name = "override-took-effect"' in injected[0].source
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "karpenter.sh/discovery: override-took-effect" in printed
    assert "   예상: " in printed and ("AMX 있음" in printed or "AMX 없음" in printed), printed[-2000:]
    assert sorted(p.name for p in (tmp_path / "images").glob("*.png")) == ["02_pool_admission.png"]
    assert "| [02_karpenter_setup.ipynb]" in (tmp_path / "index.md").read_text()


def test_refresh_copies_only_checked_outputs(tmp_path):
    path = _nb(tmp_path, "01_x.ipynb", "print('noise', 3)", checked=["print('fact', 2 + 2)"])
    committed = nbformat.read(path, as_version=4)
    executed = nbformat.read(path, as_version=4)
    stream = nbformat.v4.new_output("stream", name="stdout", text="fact 4\n")
    executed.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="noise 3\n")]
    executed.cells[2].outputs = [stream]
    executed.cells[2].execution_count = 7
    committed.cells[1].outputs = [stream]  # a stale output on an unchecked cell is cleared too
    assert nbcheck.unexpected_outputs(committed) == [f"code cell 1 ({committed.cells[1].id})"]
    changed = nbcheck.merge_checked(committed, executed)
    assert len(changed) == 1 and committed.cells[2].id in changed[0]
    # nbval skips a reference cell without an execution count: checked cells get their position, not the run's
    assert committed.cells[2].outputs == [stream] and committed.cells[2].execution_count == 3
    assert committed.cells[1].outputs == [] and nbcheck.unexpected_outputs(committed) == []
    assert nbcheck.merge_checked(committed, executed) == []  # a second refresh changes nothing
    executed.cells[2].outputs = [
        nbformat.v4.new_output("error", ename="KeyError", evalue="'x'", traceback=[])
    ]
    with pytest.raises(WorkshopError, match="failed: KeyError"):
        nbcheck.merge_checked(committed, executed)


@pytest.mark.slow
def test_refresh_executes_like_nbval_and_records_the_fact(tmp_path):
    path = _nb(
        tmp_path,
        "01_x.ipynb",
        "import os\nhere = os.getcwd()",
        checked=["import pathlib; print(pathlib.Path(here) == pathlib.Path('.').resolve(), steps * 6)"],
    )
    assert nbcheck.refresh(path, echo=lambda *a: None)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[-1].outputs[0]["text"] == "True 6\n"  # cwd is the notebook's folder; default parameters
    assert cells[1].outputs == []


def _png(path, w, h):
    from PIL import Image

    Image.new("RGB", (w, h)).save(path)
    return path


def test_image_drift_names_both_ways_and_pixel_sizes(tmp_path):
    made, tracked = tmp_path / "made", tmp_path / "tracked"
    for folder, files in (
        (made, {"01_a": (10, 5), "02_new": (4, 4), "03_c": (8, 8)}),
        (tracked, {"01_a": (10, 5), "02_old": (4, 4), "03_c": (9, 8)}),
    ):
        folder.mkdir()
        for name, (w, h) in files.items():
            _png(folder / f"{name}.png", w, h)
    problems = images.drift(images.pixel_sizes(made.glob("*.png")), images.pixel_sizes(tracked.glob("*.png")))
    assert problems == [
        "02_new.png: made by a notebook, missing from images/",
        "02_old.png: in images/, made by no notebook",
        "03_c.png: 8x8 px made, 9x8 px in images/",
    ]
    written, removed = images.replace_tracked(sorted(made.glob("*.png")), tracked)
    assert removed == ["02_old.png"] and written == ["01_a.png", "02_new.png", "03_c.png"]
    assert (
        images.drift(images.pixel_sizes(made.glob("*.png")), images.pixel_sizes(tracked.glob("*.png"))) == []
    )


def test_images_check_from_a_folder(tmp_path, capsys):
    assert notebook_commands.images(["--check", "--from", str(tmp_path / "nope")]) == 2
    _png(tmp_path / "zz_only_here.png", 3, 3)
    assert notebook_commands.images(["--check", "--from", str(tmp_path)]) == 1
    assert "zz_only_here.png: made by a notebook, missing from images/" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.after_notebooks
def test_figures_made_by_this_sessions_notebooks_match_images(request):
    """After nbval executed all six notebooks in this session: the figures they wrote (newer than the session
    start, in their default images_dir) are exactly those in images/, with the same pixel sizes."""
    ran = {Path(str(i.path)).name for i in request.session.items if str(i.path).endswith(".ipynb")}
    if ran != {p.name for p in ALL}:
        pytest.skip("needs all six notebooks executed by nbval in this session (`python -m pytest`)")
    start = request.config.workshop_session_start
    folders = {images.default_images_dir(p) for p in ALL}
    made = [f for d in folders for f in d.glob("*.png") if f.stat().st_mtime >= start]
    assert made, f"the notebooks wrote no figures into {folders} during this session"
    problems = images.drift(images.pixel_sizes(made), images.pixel_sizes(images.TRACKED.glob("*.png")))
    assert problems == [], "images/ drifted; run `python -m workshop images` and commit:\n" + "\n".join(
        problems
    )


def test_sanitizer_masks_noise_and_keeps_computed_numbers():
    import re

    from nbval.plugin import get_sanitize_patterns

    text = (REPO / "notebooks" / "nbval-sanitize.cfg").read_text()
    patterns = get_sanitize_patterns(text)
    assert len(patterns) == text.count("\nregex: "), (
        "a regex without its `replace: ` line is silently ignored"
    )
    noisy = (
        "[2026-01-02 03:04:05,266] [WARNING] [real_accelerator.py:213:get_accelerator] Setting accelerator\n"
        "per rank: plan 23.51 GiB, model 6.1 s/step, at 0x7f3a2b1c9d00 in /tmp/x/y.json, took 12.5 s\n"
        "source: moto 5.2.5 offline EC2 catalog"
    )
    for regex, replace in patterns:
        noisy = re.sub(regex, replace, noisy)
    assert noisy == (
        "per rank: plan 23.51 GiB, model 6.1 s/step, at 0xADDRESS in <PATH>, took <DURATION>\n"
        "source: moto <VERSION> offline EC2 catalog"
    )


def test_the_runners_kernel_talks_over_unix_sockets_in_a_private_folder(tmp_path):
    """papermill's kernel for `workshop run` listens on Unix sockets (no loopback TCP port another user could
    reach, no unencrypted-TCP warning); the fresh-clone test used to check this by running chapters again."""
    from workshop.launch.notebooks import ipc_kernel_manager

    manager = ipc_kernel_manager(str(tmp_path))()
    assert manager.transport == "ipc" and manager.ip == str(tmp_path / "kernel")


def test_the_runners_kernel_is_not_interrupted_on_its_way_out(tmp_path, monkeypatch):
    """jupyter_client interrupts a kernel before it shuts it down; after papermill's last cell that interrupt
    only made ipykernel print "ERROR | KeyboardInterrupt caught in kernel." into `workshop run`'s output (seen
    in a newcomer's chapter 02). An interrupt while the kernel runs still goes through."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from workshop.launch.notebooks import ipc_kernel_manager

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = ipc_kernel_manager(str(tmp_path))()
    asyncio.run(manager._async_interrupt_kernel())
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())
    assert sent == [False]


def test_deepspeeds_op_compiles_beside_chapter_02_only_when_ranks_follow(tmp_path, monkeypatch):
    """The C++ op the ranks of chapters 03 and 04 load is built beside chapter 02, which measures nothing,
    instead of inside chapter 03's first launch (~40 CPU s on a machine that has not built it); never beside
    a chapter that measures, and not at all when no chapter with ranks follows or the op is built."""
    from workshop.launch import notebooks as nb
    from workshop.launch import torchrun

    def paths(*numbers):
        return [tmp_path / f"{n}_x.ipynb" for n in numbers]

    assert nb.build_beside(paths("01", "02", "03", "04")) == tmp_path / "02_x.ipynb"
    assert nb.build_beside(paths("02", "05")) == tmp_path / "02_x.ipynb"
    assert nb.build_beside(paths("01", "02")) is None and nb.build_beside(paths("01", "03", "04")) is None
    started, said = [], []
    monkeypatch.setattr(torchrun, "ops_to_build", lambda args: ["deepspeed_shm_comm"])
    monkeypatch.setattr(torchrun.subprocess, "Popen", lambda cmd, **kw: started.append(cmd) or "proc")
    two = tmp_path / "02_x.ipynb"
    assert nb.ops_beside(tmp_path / "01_x.ipynb", two, said.append) is None and not started
    assert nb.ops_beside(two, two, said.append) == "proc"
    assert "ShareMemCommBuilder().load" in started[0][-1] and "chapter 02" in said[0]
    monkeypatch.setattr(torchrun, "ops_to_build", lambda args: [])
    assert nb.ops_beside(two, two, said.append) is None and len(started) == 1
