"""Chapter 06's measurements: the collective benchmark and its fit, ZeRO-3's calls counted in a real run, and
the traffic model (`workshop.plan.traffic`) checked against runs on this machine.

One module per seam: collectives (the benchmark and its fit), counting (what a real ZeRO-3 run calls), local
(the model checked against runs here), results (what `workshop comms` writes).
"""

from __future__ import annotations

from workshop.experiments.comms.collectives import (
    OPS,
    SIZES_MB,
    bench_figure,
    bus_factor,
    collective_time,
    fit_collectives,
    loopback_bytes,
    netsim_collective_bench,
    run_collective_bench,
)
from workshop.experiments.comms.counting import per_step_calls
from workshop.experiments.comms.local import (
    LocalRun,
    local_comparison,
    netsim_check,
    netsim_reproduced,
    offload_on_cpu,
    predict_from_single_rank,
    run_training,
    stored_local,
    train_argv,
)
from workshop.experiments.comms.results import model_report

__all__ = [
    "OPS",
    "SIZES_MB",
    "LocalRun",
    "bench_figure",
    "bus_factor",
    "collective_time",
    "fit_collectives",
    "local_comparison",
    "netsim_reproduced",
    "offload_on_cpu",
    "loopback_bytes",
    "model_report",
    "netsim_check",
    "netsim_collective_bench",
    "per_step_calls",
    "predict_from_single_rank",
    "run_collective_bench",
    "run_training",
    "stored_local",
    "train_argv",
]
