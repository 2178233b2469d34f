"""`workshop comms model|bench|local|netsim`: run a part, print its verdict, merge the result into a JSON
file."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

from workshop.errors import WorkshopError, check_output, check_positive, read_json, report
from workshop.experiments.comms.collectives import (
    SIZES_MB,
    CollectiveBench,
    NetsimBench,
    _worker,
    netsim_collective_bench,
    run_collective_bench,
)
from workshop.experiments.comms.counting import _count_worker
from workshop.experiments.comms.local import LocalRow, NetsimCheck, local_comparison, netsim_check
from workshop.paths import RESULTS_DIR
from workshop.plan.models import PRESETS
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


def _merged_into(path: Path) -> dict:
    """What --out already holds (results are merged into it), read before any part runs: a file that is not
    a JSON object would otherwise fail only after minutes of benchmarks."""
    check_output(path, "--out")
    return (
        read_json(path, "--out", "a JSON object (results are merged into it)") if Path(path).exists() else {}
    )


def _write(result: CommsResult, path: Path, old: dict | None = None) -> Path:
    path = Path(path)
    old = _merged_into(path) if old is None else old
    path.parent.mkdir(parents=True, exist_ok=True)

    path.write_text(json.dumps({**old, **result, "versions": versions()}, indent=2, default=str))
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="workshop comms",
        description="How many bytes ZeRO moves per step, over which wire, and what that costs.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model", help="predict the original workshop's GPU topologies and check the claims")
    m.add_argument("--overlap", type=float, default=0.0)
    m.add_argument("--efa-per-pod", type=int, default=1)
    b = sub.add_parser("bench", help="collective bus bandwidth over message sizes")
    b.add_argument("--backend", default="gloo", help="gloo (CPU) | nccl (GPU)")
    b.add_argument("--nproc", type=int, default=2)
    b.add_argument("--sizes-mb", type=float, nargs="+", default=list(SIZES_MB))
    b.add_argument("--iters", type=int, default=5)
    loc = sub.add_parser("local", help="bench + local ZeRO-3 step times vs the model")
    loc.add_argument(
        "--models",
        nargs="+",
        default=["tiny", "small"],
        choices=list(PRESETS),
        metavar="PRESET",
        help=f"presets, from: {', '.join(PRESETS)}",
    )
    loc.add_argument("--steps", type=int, default=10)
    ns = sub.add_parser(
        "netsim", help="bench inside chapter 05's rate-capped namespaces; check its step times"
    )
    ns.add_argument("--rates", nargs="+", default=["10gbit", "1gbit"])
    ns.add_argument("--netsim-json", default=str(NETSIM_RESULTS), help="workshop netsim --json output")
    for s in (m, b, loc, ns):
        s.add_argument("--out", default=str(RESULTS), help="JSON file (merged)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        return _worker(argv[1:])
    if argv[:1] == ["_count"]:
        return _count_worker(argv[1:])
    a = _parser().parse_args(argv)
    try:
        old = _merged_into(a.out)
        check_positive("--efa-per-pod", getattr(a, "efa_per_pod", 1))
        check_positive("--steps", getattr(a, "steps", 1))
        check_positive("--iters", getattr(a, "iters", 1))
        if a.cmd == "netsim":  # read before the namespaces are made and the benchmark runs
            if not Path(a.netsim_json).exists():
                raise WorkshopError(
                    f"{a.netsim_json} not found: run `python -m workshop netsim --json {a.netsim_json}` first"
                )
            measured = read_json(
                a.netsim_json, "--netsim-json", "the JSON report of `workshop netsim --json`"
            )
        res: CommsResult
        if a.cmd == "model":
            res = {"model": model_report(a.overlap, a.efa_per_pod)}
            c = res["model"]["checks"]
            print(
                f"p4d ratio predicted {c['p4d_ratio_predicted']:.2f} vs measured "
                f"{c['p4d_ratio_measured']:.2f} "
                f"({c['p4d_ratio_error']:+.0%}); ordering ok: {c['ordering_ok']}"
            )
        elif a.cmd == "bench":
            res = {
                "bench": run_collective_bench(
                    backend=a.backend, nproc=a.nproc, sizes_mb=a.sizes_mb, iters=a.iters
                )
            }
            for op, f in res["bench"]["fit"].items():
                print(f"{op:15s} {f['gbytes_per_s']:.2f} GB/s  latency {f['alpha_s'] * 1e3:.2f} ms")
        elif a.cmd == "netsim":
            capped = netsim_collective_bench(a.rates)
            check = netsim_check(capped, measured)
            res = {"netsim": {"bench": capped, **check}}
            for row in check["rows"]:
                print(
                    f"{row['rate']:8s} measured {row['measured_s']:.3f} s  "
                    f"model {row['predicted_s']:.3f} s "
                    f"({row['error']:+.0%}); line rate only {row['line_rate_predicted_s']:.3f} s"
                )
        else:
            bench = run_collective_bench()
            rows = local_comparison(bench["fit"], models=a.models, steps=a.steps)
            res = {"bench": bench, "local": rows, "local_max_abs_error": max(abs(r["error"]) for r in rows)}
            for r in rows:
                print(
                    f"{r['model']:6s} offload={r['offload']!s:5s} predicted {r['predicted_s']:.3f} s "
                    f"measured {r['measured_s']:.3f} s ({r['error']:+.0%})"
                )
        print(f"wrote {_write(res, Path(a.out), old)}")
    except WorkshopError as e:
        return report(e)
    return 0
