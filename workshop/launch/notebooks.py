"""`workshop run`: execute the workbook's notebooks in order with papermill, small defaults unless overridden.

`--lang ko` runs the Korean notebooks (notebooks-ko/, `workshop i18n sync` writes them) with WORKSHOP_LANG=ko
in the kernel's environment, so the package's computed sentences are Korean too; same parameters, same index.
Executed notebooks go to <out>/notebooks/, figures to <out>/images/, and <out>/index.md + index.json say what
ran, how long it took and what it produced. The run stops at the first failing notebook and names the notebook
and the cell.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_output
from workshop.lang import LANGUAGES, _
from workshop.launch import ledger, timings
from workshop.launch.procs import stop_tree
from workshop.paths import NOTEBOOKS_DIR, NOTEBOOKS_KO_DIR

NOTEBOOKS = NOTEBOOKS_DIR
FOLDERS = {"en": NOTEBOOKS_DIR, "ko": NOTEBOOKS_KO_DIR}  # language -> its notebooks


@contextlib.contextmanager
def language(lang: str) -> Iterator[None]:
    """WORKSHOP_LANG for the kernels started inside (they inherit this process's environment), then
    restored."""
    old = os.environ.get("WORKSHOP_LANG")
    os.environ["WORKSHOP_LANG"] = lang
    try:
        yield
    finally:
        if old is None:
            del os.environ["WORKSHOP_LANG"]
        else:
            os.environ["WORKSHOP_LANG"] = old


@contextlib.contextmanager
def launch_ledger(path: Path) -> Iterator[Path]:
    """WORKSHOP_LAUNCH_LOG for the kernel started inside: the chapter's launches go to `path` (emptied
    first), unless the caller keeps a ledger of its own; then restored."""
    old = os.environ.get(ledger.LEDGER_ENV)
    if old:
        yield Path(old)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.environ[ledger.LEDGER_ENV] = str(path)
    try:
        yield path
    finally:
        del os.environ[ledger.LEDGER_ENV]


@dataclass
class NotebookRun:
    notebook: str
    status: str  # ok | failed | skipped
    seconds: float = 0.0
    output: str | None = None
    parameters: dict = field(default_factory=dict)
    error: str | None = None
    images: list[str] = field(default_factory=list)
    launches: dict = field(default_factory=dict)  # ledger.summary of the processes the chapter launched


def notebooks(only: list[str] | None = None, folder: Path = NOTEBOOKS) -> list[Path]:
    """The numbered notebooks, in order; `only` selects by number or name prefix ("04", "04_single")."""
    found = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if only:
        picked = [p for p in found if any(p.name.startswith(o) for o in only)]
        unknown = [
            o for o in only if not o.strip() or not any(p.name.startswith(o) for p in found)
        ]  # '' matches all
        if unknown:
            raise WorkshopError(
                f"no notebook matches {unknown}; available: {', '.join(p.stem for p in found)}"
            )
        found = picked
    return found


def parse_value(text: str):
    """`-p nodes 2` gives an int, `-p model small` a string: the same rule as papermill's -p."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _failed_cell(nb_path: Path) -> str:
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    added = {
        "injected-parameters",
        "papermill-error-cell-tag",
    }  # cells papermill adds; number as in the source
    cells = [c for c in nb.cells if not added & set(c.get("metadata", {}).get("tags", []))]
    for i, cell in enumerate(cells):
        if cell.get("metadata", {}).get("papermill", {}).get("status") == "failed" or any(
            o.get("output_type") == "error" for o in cell.get("outputs", [])
        ):
            first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
            return f"cell {i} ({first[:60]!r})"
    return "unknown cell"


def declared_parameters(path: Path) -> dict:
    """Name -> papermill's description (type, default, help) of the notebook's `parameters` cell."""
    import papermill as pm

    return dict(pm.inspect_notebook(str(path)))


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a JSON list"}


def _fits(value, default) -> bool:
    """Whether a `-p` value (as parse_value read it) has the kind of the parameter's default; a default of
    None or an expression says nothing. An int is a fine float; a bool is no int."""
    if type(default) not in _KINDS:
        return True
    if isinstance(default, (bool, int)):
        return type(value) is type(default)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, type(default))


def check_overrides(paths: list[Path], overrides: dict) -> None:
    """Refuse, before anything runs, a `-p` name that none of the selected notebooks declares, and a value
    of another kind than the notebook's default (`-p nodes two`), which would fail only in a cell."""
    params = {p: declared_parameters(p) for p in paths}
    declared = {
        name: [p.stem[:2] for p in paths if name in params[p]]
        for name in {n for ps in params.values() for n in ps}
    }
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        listing = "; ".join(f"{n} ({', '.join(nbs)})" for n, nbs in sorted(declared.items()))
        raise WorkshopError(
            f"parameter {', '.join(map(repr, unknown))} is declared by none of the selected "
            f"notebooks; declared: {listing}"
        )
    for name, value in overrides.items():
        for path in (p for p in paths if name in params[p]):
            text = params[path][name].get("default")
            try:
                default = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError):
                continue
            if not _fits(value, default):
                hint = (
                    " (quote a string JSON would read as something else, e.g. -p NAME '\"2.3\"')"
                    if isinstance(default, str)
                    else ""
                )
                raise WorkshopError(
                    f"-p {name} {json.dumps(value)}: {path.stem} declares {name} = {text}, so "
                    f"it takes {_KINDS[type(default)]}{hint}"
                )


def ipc_kernel_manager(socket_dir: str):
    """A kernel manager whose sockets are Unix files in a private folder instead of loopback TCP ports: no
    other user of the host can connect to the kernel, and ipykernel 7 has no unencrypted-TCP warning to
    print."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=str(Path(socket_dir) / "kernel"), **kwargs)

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client interrupts every kernel before shutting it down; papermill shuts one down after
            # its last cell, idle, and an interrupt landing in ipykernel's message loop only prints "ERROR |
            # KeyboardInterrupt caught in kernel." into the run's output. The shutdown still ends the kernel.
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


def run_notebook(path: Path, out: Path, overrides: dict, kernel: str = "python3") -> NotebookRun:
    import tempfile

    import papermill as pm

    declared = set(declared_parameters(path))
    params = {"images_dir": str(out / "images"), "out_dir": str(out), **overrides}
    params = {k: v for k, v in params.items() if k in declared}  # pass each notebook only what it declares
    dest = out / "notebooks" / path.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    before = set((out / "images").glob("*.png"))
    t0 = time.time()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="workshop-kernel-") as sockets,
            launch_ledger(out / "launches" / f"{path.stem}.jsonl") as launches,
        ):
            pm.execute_notebook(
                str(path),
                str(dest),
                parameters=params,
                cwd=str(path.parent),
                kernel_name=kernel,
                progress_bar=False,
                log_output=False,
                kernel_manager_class=ipc_kernel_manager(sockets),
            )
    except Exception as e:  # noqa: BLE001 -- any failure of a notebook is reported, not raised
        msg = (
            f"{path.name}, {_failed_cell(dest) if dest.exists() else 'before the first cell'}: "
            f"{getattr(e, 'ename', type(e).__name__)}: {getattr(e, 'evalue', e)}"
        )
        return NotebookRun(path.name, "failed", round(time.time() - t0, 1), str(dest), params, msg)
    images = sorted(str(p.relative_to(out)) for p in set((out / "images").glob("*.png")) - before)
    counts = ledger.summary(ledger.read(launches))
    return NotebookRun(
        path.name, "ok", round(time.time() - t0, 1), str(dest), params, images=images, launches=counts
    )


def write_index(out: Path, runs: list[NotebookRun]) -> Path:
    (out / "index.json").write_text(json.dumps([asdict(r) for r in runs], indent=2))
    lines = [
        "# Workbook run",
        "",
        "| notebook | status | seconds | launches (ranks, steps) | figures |",
        "|---|---|---|---|---|",
    ]
    for r in runs:
        nb = f"[{r.notebook}](notebooks/{r.notebook})" if r.output else r.notebook
        n = r.launches
        started = f"{n['launches']} ({n['ranks']}, {n['steps']})" if n else "-"
        lines.append(f"| {nb} | {r.status} | {r.seconds} | {started} | {', '.join(r.images) or '-'} |")
    errors = [r.error for r in runs if r.error]
    lines += ["", *(f"**Failed:** {e}" for e in errors)]
    path = out / "index.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# Chapters that measure nothing (no timing, no memory peak): a compile may run beside them.
MEASURE_NOTHING = ("02",)


def build_beside(todo: list[Path]) -> Path | None:
    """The notebook beside which DeepSpeed's C++ ops compile, on a machine that has not built them: the first
    of MEASURE_NOTHING that a later chapter with ranks (03 on) follows. None: no such pair in this run."""
    for i, path in enumerate(todo):
        if path.name[:2] in MEASURE_NOTHING and any(p.name[:2] >= "03" for p in todo[i + 1 :]):
            return path
    return None


def ops_beside(path: Path, beside: Path | None, echo):
    """Start the ops' build if `path` is the notebook to build beside and they are not built yet."""
    if path != beside:
        return None
    from workshop.launch.torchrun import start_op_build
    from workshop.train.args import TrainArgs

    build = start_op_build(TrainArgs())  # the engine chapters 03 and 04 start: DeepSpeed on the CPU
    if build is not None:
        echo(
            _(
                "    (compiling DeepSpeed's shared-memory op beside chapter {n}, once: the ranks load it)"
            ).format(n=path.name[:2])
        )
    return build


def run_workbook(
    out: str | Path = "out",
    only: list[str] | None = None,
    overrides: dict | None = None,
    echo=print,
    folder: Path | None = None,
    stop_on_failure: bool = False,
    lang: str = "en",
) -> list[NotebookRun]:
    check_choice("--lang", lang, LANGUAGES)
    folder = folder or FOLDERS[lang]
    if not notebooks(None, folder):
        raise WorkshopError(
            f"no notebooks in {folder}; `python -m workshop i18n sync` writes the Korean ones"
        )
    todo = notebooks(only, folder)
    check_overrides(todo, overrides or {})
    check_output(out, "--out", folder=True)
    out = Path(out).resolve()
    (out / "images").mkdir(parents=True, exist_ok=True)
    expected = timings.expectation([p.name[:2] for p in todo], busy=timings.busy_cpus())
    if expected:
        echo(expected)
    runs: list[NotebookRun] = []
    beside = build_beside(todo)
    for i, path in enumerate(todo):
        echo(f"[{i + 1}/{len(todo)}] {path.name} ...")
        build = ops_beside(path, beside, echo)
        try:
            with language(lang):
                run = run_notebook(path, out, overrides or {})
        except BaseException:  # an interrupt: the build goes with the run
            if build is not None:
                stop_tree(build.pid)
            raise
        if build is not None:  # done before a chapter that measures starts; the wait counts as this one's
            t0 = time.time()
            build.wait()
            run.seconds = round(run.seconds + time.time() - t0, 1)
            echo(
                _("    (then {seconds:.0f} s waiting for that build, counted in this chapter's time)").format(
                    seconds=time.time() - t0
                )
            )
        runs.append(run)
        said = {"ok": _("ok in {seconds} s"), "failed": _("failed in {seconds} s")}.get(
            run.status, "{seconds}"
        )
        echo("    " + said.format(seconds=run.seconds) + (f": {run.error}" if run.error else ""))
        if run.status == "failed" and stop_on_failure:
            runs += [NotebookRun(p.name, "skipped") for p in todo[i + 1 :]]
            break
    write_index(out, runs)
    return runs
