"""`workshop bench workbook`: every notebook with its small defaults, timed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TypedDict

from workshop.launch import timings
from workshop.launch.notebooks import run_workbook


class NotebookTiming(TypedDict):
    notebook: str
    status: str
    seconds: float


class WorkbookSmoke(TypedDict):
    """`workbook_smoke()`'s record: benchmarks/results/workbook.json."""

    benchmark: str
    total_s: float
    minutes: float
    all_ok: bool
    notebooks: list[NotebookTiming]


def workbook_smoke(
    out: str | Path = "out/bench-workbook", echo=print, timings_path: Path = timings.TIMINGS
) -> WorkbookSmoke:
    """Every notebook with its small defaults (papermill), timed: the smoke run CI does. A run where every
    notebook ran is also appended to the per-machine history (benchmarks/results/timings.json) that
    `workshop run` reads its estimate from, each chapter's launch counts in its `extra`."""

    t0 = time.time()
    runs = run_workbook(out, echo=echo)
    total = time.time() - t0
    if all(r.status == "ok" for r in runs):  # with what each chapter launched (workshop.launch.ledger)
        launches = {r.notebook: r.launches for r in runs}
        record = timings.new_timing("workbook", {r.notebook: r.seconds for r in runs}, launches=launches)
        timings.record(record, timings_path)
    return {
        "benchmark": "workbook",
        "total_s": round(total, 1),
        "minutes": round(total / 60, 2),
        "all_ok": all(r.status == "ok" for r in runs),
        "notebooks": [{"notebook": r.notebook, "status": r.status, "seconds": r.seconds} for r in runs],
    }
