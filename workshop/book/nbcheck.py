"""`workshop nbval refresh`: re-record the outputs that nbval checks, after a legitimate change; and
`truth_problems`, the mechanical read of an executed notebook that `workshop run` applies to its outputs.

The test suite executes every notebook with nbval (`--nbval-lax`): only cells marked `# NBVAL_CHECK_OUTPUT`
are compared with the outputs committed in the notebook, and every other cell stays output-free in git.
When a checked fact changes on purpose (a planner constant, a validator message, a new TrainJob field),
`refresh` executes the notebook the way nbval does (default parameters, cwd notebooks/) and copies the fresh
outputs of the checked cells -- and nothing else -- into the committed file. Review the diff, then commit.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.launch.notebooks import ipc_kernel_manager
from workshop.report.verdict import VERDICT_WORDS

MARKER = "NBVAL_CHECK_OUTPUT"


def is_checked(cell) -> bool:
    """nbval's own rule: a comment line `# NBVAL_CHECK_OUTPUT` anywhere in a code cell's source."""
    return cell.get("cell_type") == "code" and any(
        line.strip().startswith("#") and line.strip().lstrip("#").strip() == MARKER
        for line in "".join(cell.get("source", "")).splitlines()
    )


def unexpected_outputs(nb) -> list[str]:
    """Code cells that hold outputs or an execution count in git although nbval does not check them."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return [
        f"code cell {i} ({c.get('id') or '?'})"
        for i, c in enumerate(code)
        if not is_checked(c) and (c.get("outputs") or c.get("execution_count") is not None)
    ]


def stamp(nb) -> None:
    """Committed form: outputs only on checked cells, each with a fixed execution count (its position among
    the code cells). nbval refuses a reference cell that has outputs but no count ("unrun"); a position
    instead of the count of the recording run keeps re-recording from changing lines that did not change."""
    for n, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1):
        if not is_checked(cell):
            cell.outputs, cell.execution_count = [], None
            continue
        cell.execution_count = n
        for out in cell.outputs:
            if "execution_count" in out:
                out["execution_count"] = n


def merge_checked(committed, executed) -> list[str]:
    """Copy the checked cells' outputs from `executed` into `committed` (matched by cell id); clear the rest.

    Returns one line per checked cell whose output changed. Raises if a checked cell failed or is missing.
    """
    fresh = {c.get("id"): c for c in executed.cells}
    stamp(committed)
    changed = []
    for cell in committed.cells:
        if not is_checked(cell):
            continue
        run = fresh.get(cell.get("id"))
        if run is None:
            raise WorkshopError(f"checked cell {cell.get('id')} is missing from the executed notebook")
        errors = [o for o in run.outputs if o.get("output_type") == "error"]
        if errors:
            raise WorkshopError(
                f"checked cell {cell.get('id')} failed: {errors[0].get('ename')}: {errors[0].get('evalue')}"
            )
        before = json.dumps(cell.outputs, sort_keys=True)
        cell.outputs = copy.deepcopy(run.outputs)
        stamp(committed)
        if json.dumps(cell.outputs, sort_keys=True) != before:
            first = cell.source.strip().splitlines()[1:2] or [""]
            changed.append(f"cell {cell.get('id')} ({first[0][:50]!r})")
    return changed


def execute(path: Path, timeout: int = 1800):
    """Run a notebook as nbval does: its own default parameters, cwd = its folder, this interpreter's
    kernel."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    try:
        with tempfile.TemporaryDirectory(prefix="workshop-kernel-") as sockets:
            NotebookClient(
                nb,
                timeout=timeout,
                kernel_name="python3",
                allow_errors=False,
                coalesce_streams=True,
                resources={"metadata": {"path": str(path.parent)}},
                kernel_manager_class=ipc_kernel_manager(sockets),
            ).execute()
    except CellExecutionError as e:
        raise WorkshopError(f"{path.name} failed, nothing recorded: {e.ename}: {e.evalue}") from e
    return nb


def refresh(path: Path, echo=print) -> list[str]:
    import nbformat

    committed = nbformat.read(path, as_version=4)
    if not any(is_checked(c) for c in committed.cells):
        echo(f"{path.name}: no checked cells")
        return []
    changed = merge_checked(committed, execute(path))
    nbformat.write(committed, path)
    echo(
        f"{path.name}: "
        + (
            f"{len(changed)} checked output(s) changed: " + "; ".join(changed)
            if changed
            else "checked outputs unchanged"
        )
    )
    return changed


# ---------------------------------------------------------------- truth: what an executed chapter printed

_VERDICT = re.compile(r"\b(" + "|".join(VERDICT_WORDS) + r")\b", re.I)
_ONE_ROUND = re.compile(r"\b(one|1|a single|single) (sequential )?round\b|\b1 round\(s\)", re.I)
_REFUSAL = re.compile(r"no single share can be read", re.I)
_NUM = r"\d+(?:\.\d+)?"
# ranges, and percentages that are not a share: a spread, a signed drift, a bound
_NOT_A_SHARE = re.compile(
    rf"between {_NUM}% and {_NUM}%|{_NUM}%?\s*[-–]\s*{_NUM}%|\b(?:spread|noise|drift(?:ed)?|bound) {_NUM}%"
    rf"|[+-]{_NUM}%|the {_NUM}% this workbook trusts|\b{_NUM}% this workbook trusts",
    re.I,
)
_PCT = re.compile(rf"{_NUM}%")
# one number above 100 quoted as a share of something ("141.6% of this CPU's bf16 peak"); a range's bound
# ("121-137% of it") and "above 100% of peak" are not
_OVER_SHARE = re.compile(rf"(?<![\d.\-–])({_NUM})% of (?:this|that|the|its)\b", re.I)
_STORED = re.compile(r"(?<!no )\bstored\b(?! (?:object|as)\b)", re.I)  # "no stored result" cites nothing
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _texts(cell) -> list[str]:
    """What a code cell printed, as text: streams, and the plain or markdown form of what it displayed."""
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append("".join(o.get("text", "")))
        elif "data" in o:
            data = o["data"]
            text = data.get("text/markdown") or data.get("text/plain") or ""
            out.append("".join(text))
    return out


def truth_problems(nb) -> list[str]:
    """The sentence kinds issue 49 found, read mechanically from an executed notebook's outputs: a verdict
    word ("beats", "costs", "pays", "faster", "slower") on a line that says it comes from one round, or in a
    cell whose progress lines show one round; a single
    percentage after "no single share can be read" in the same cell (ranges, spreads and drifts are fine); one
    number above 100 quoted as a share ("141.6% of this CPU's bf16 peak": a wrong clock or peak, never a
    share); a line that cites a stored result without a date. One line per problem: cell, kind, the line."""
    problems = []
    for i, cell in enumerate(c for c in nb["cells"] if c.get("cell_type") == "code"):
        refused = False
        text = "\n".join(_texts(cell))
        # a cell whose own progress lines show one round ("[round 1] ..." and no "[round 2]") measured one
        one_round = "[round 1]" in text and "[round 2]" not in text
        for line in text.splitlines():
            where = f"code cell {i} ({cell.get('id') or '?'})"
            said_once = _ONE_ROUND.search(line) or (one_round and not line.startswith("[round"))
            if _VERDICT.search(line) and said_once:
                problems.append(f"{where}: a verdict from one round: {line.strip()[:200]}")
            if refused and _PCT.search(_NOT_A_SHARE.sub("", line)):
                problems.append(f"{where}: a single percentage after a refusal: {line.strip()[:200]}")
            if any(float(m.group(1)) > 100 for m in _OVER_SHARE.finditer(_NOT_A_SHARE.sub("", line))):
                problems.append(f"{where}: a single share above 100%: {line.strip()[:200]}")
            if _REFUSAL.search(line):
                refused = True
            header = line.lstrip().startswith("|") and not re.search(r"\d", line)  # a table's column names
            if _STORED.search(line) and not _DATE.search(line) and not header:
                problems.append(f"{where}: a stored figure without its date: {line.strip()[:200]}")
    return problems
