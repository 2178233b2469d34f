"""Every process launch a run makes, one JSON line each, when WORKSHOP_LAUNCH_LOG names a file.

Why: the workbook's time on 2 cores is mostly launches (each pays torchrun's and every rank's imports, the
process group and the engine before its first step) and first steps (torch.compile), not steps. A line
says what started (the module, the ranks), its wall seconds, the CPU seconds of its process tree (a
figure a busy machine inflates far less than wall time) and, for a training run, the seconds before its
first step record arrived, that first step (which compiles) and the median of the others. `workshop run`
writes one ledger per chapter (<out>/launches/); `summary` counts them, so a change that adds a launch or
a compile shows as a count, not only as a slower run on a shared machine.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
from collections.abc import Sequence
from pathlib import Path

LEDGER_ENV = "WORKSHOP_LAUNCH_LOG"


def children_cpu_s() -> float:
    """CPU seconds of this process's children that have ended and been waited for (their own children
    included, when they waited for them: torchrun waits for its ranks)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def what(cmd: Sequence[str]) -> tuple[str, int]:
    """(the module or script a command line runs, the ranks it starts): torchrun's `-m MODULE` and
    `--nproc-per-node`, else python's own `-m MODULE` or `-c`."""
    args = list(cmd)
    ranks = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--nproc-per-node=")), 1)
    mods = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m"]
    mods = [m for m in mods if m != "torch.distributed.run"]
    if mods:
        return mods[0], ranks
    return ("python -c" if "-c" in args else Path(args[0]).name if args else "?"), ranks


def record(
    cmd: Sequence[str],
    seconds: float,
    cpu_s: float,
    steps: Sequence[dict] = (),
    first_arrived_s: float | None = None,
    **facts,
) -> None:
    """Append one launch to the ledger WORKSHOP_LAUNCH_LOG names (nothing when it is unset). `steps`: the
    run's METRIC records; `first_arrived_s`: seconds from the launch to the first one's arrival."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    module, ranks = what(cmd)
    line: dict = {"module": module, "ranks": ranks, "seconds": round(seconds, 2), "cpu_s": round(cpu_s, 2)}
    times: list[float] = [float(s["step_time_s"]) for s in steps if s.get("step_time_s") is not None]
    if times:
        line.update(
            steps=len(steps),
            first_step_s=round(times[0], 2),
            steady_step_s=round(statistics.median(times[1:]), 3) if len(times) > 1 else None,
        )
        if first_arrived_s is not None:
            line["start_s"] = round(first_arrived_s - times[0], 2)  # imports, group, engine
    line.update(facts)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def read(path: str | Path) -> list[dict]:
    """The ledger's launches, in order ([] when there is none)."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def summary(launches: Sequence[dict]) -> dict:
    """What a ledger adds up to: launches, ranks started, steps, and the seconds (wall, CPU, start-up, first
    steps) they took."""

    def total(key: str) -> float:
        return round(sum(x.get(key) or 0 for x in launches), 1)

    return {
        "launches": len(launches),
        "ranks": sum(x["ranks"] for x in launches),
        "steps": sum(x.get("steps", 0) for x in launches),
        "seconds": total("seconds"),
        "cpu_s": total("cpu_s"),
        "start_s": total("start_s"),
        "first_step_s": total("first_step_s"),
    }
