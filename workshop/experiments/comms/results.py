"""What `workshop comms` writes: the model's report, the benchmark parts, and comms.json merged key by key."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

from workshop.errors import WorkshopError, check_output, read_json
from workshop.experiments.comms.collectives import (
    CollectiveBench,
    NetsimBench,
    netsim_collective_bench,
    run_collective_bench,
)
from workshop.experiments.comms.local import LocalRow, NetsimCheck, local_comparison, netsim_check
from workshop.paths import RESULTS_DIR
from workshop.plan.topology import OriginalWorkload
from workshop.plan.traffic import (
    OriginalChecks,
    OverlapPoint,
    original_checks,
    original_comparison,
    original_traffic,
    overlap_sweep,
)
from workshop.train.guard import versions

RESULTS = RESULTS_DIR / "comms.json"
NETSIM_RESULTS = RESULTS_DIR / "netsim.json"


class ModelReport(TypedDict):
    """The traffic model against the original workshop's runs (comms.json "model")."""

    workload: dict[str, Any]  # OriginalWorkload's fields
    traffic_per_rank_per_step: dict[str, Any]  # Traffic's fields
    overlap: float
    efa_per_pod: int
    rows: list[dict[str, Any]]  # OriginalRow's fields and its error
    checks: OriginalChecks
    overlap_sweep: list[OverlapPoint]


class NetsimSection(NetsimCheck):
    bench: NetsimBench


class CommsResult(TypedDict, total=False):
    """What one `workshop comms` command merges into comms.json: each writes its own keys."""

    model: ModelReport  # comms model
    bench: CollectiveBench  # comms bench, comms local
    local: list[LocalRow]  # comms local
    local_max_abs_error: float
    netsim: NetsimSection  # comms netsim


def model_report(overlap: float = 0.0, efa_per_pod: int = 1) -> ModelReport:
    """The traffic model against the original workshop's GPU runs: per-rank bytes per step, predicted vs
    measured step times in seconds (rows, with their relative error), the claims' checks and an overlap
    sweep."""
    rows = original_comparison(overlap=overlap, efa_per_pod=efa_per_pod)
    tr = original_traffic()
    return {
        "workload": asdict(OriginalWorkload()),
        "traffic_per_rank_per_step": asdict(tr),
        "overlap": overlap,
        "efa_per_pod": efa_per_pod,
        "rows": [{**asdict(r), "error": r.error} for r in rows],
        "checks": original_checks(rows),
        "overlap_sweep": overlap_sweep(),
    }


def merged_into(path: str | Path) -> dict:
    """What --out already holds (results are merged into it), read before any part runs: a file that is not
    a JSON object would otherwise fail only after minutes of benchmarks."""
    check_output(path, "--out")
    return (
        read_json(path, "--out", "a JSON object (results are merged into it)") if Path(path).exists() else {}
    )


def write_result(result: CommsResult, path: str | Path, old: dict | None = None) -> Path:
    """Merge one command's keys into the JSON file (what it held before, read by `merged_into`)."""
    path = Path(path)
    old = merged_into(path) if old is None else old
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**old, **result, "versions": versions()}, indent=2, default=str))
    return path


def read_netsim(path: str | Path) -> dict:
    """`workshop netsim --json`'s report, read before the namespaces are made and the benchmark runs."""
    if not Path(path).exists():
        raise WorkshopError(f"{path} not found: run `python -m workshop netsim --json {path}` first")
    return read_json(path, "--netsim-json", "the JSON report of `workshop netsim --json`")


def netsim_part(rates: list[str], measured: dict) -> CommsResult:
    """The collective benchmark behind chapter 05's rate caps, and the model checked against its steps."""
    capped = netsim_collective_bench(rates)
    return {"netsim": {"bench": capped, **netsim_check(capped, measured)}}


def local_part(models: list[str], steps: int) -> CommsResult:
    """The loopback benchmark and local ZeRO-3 step times against the model (error: relative, +-)."""
    bench = run_collective_bench()
    rows = local_comparison(bench["fit"], models=models, steps=steps)
    return {"bench": bench, "local": rows, "local_max_abs_error": max(abs(r["error"]) for r in rows)}
