"""How many bytes ZeRO moves per step, over which wire, and what that costs: chapter 06's model and benchmark.

The model is deliberately small: step time = compute + (1 - overlap) x (collective bytes / link bandwidth
+ offload bytes / PCIe bandwidth). Bytes come from the ZeRO algorithm (ring factor (N-1)/N, gradient
accumulation, one all-gather per forward, backward and checkpoint recompute); bandwidths come from
workshop.topology (published line rates x one stated efficiency). The only number taken from a
measurement is each instance's compute time, read off its own single-pod run; every multi-pod time is
then a prediction. Locally the same model is calibrated with a torch.distributed collective benchmark.


One module per seam: model (the arithmetic), collectives (the benchmark and its fit), zero3_calls (what
ZeRO-3 issues, derived and counted), local (the model checked against runs here), cli.
"""

from __future__ import annotations

from workshop.comms.cli import main, model_report
from workshop.comms.collectives import (
    OPS,
    SIZES_MB,
    bus_factor,
    collective_time,
    fit_collectives,
    loopback_bytes,
    netsim_collective_bench,
    run_collective_bench,
)
from workshop.comms.local import (
    LocalRun,
    local_comparison,
    netsim_check,
    predict_from_single_rank,
    run_training,
    train_argv,
)
from workshop.comms.model import (
    SeedRow,
    StepPrediction,
    Traffic,
    bandwidth_sweep,
    collective_bandwidth,
    gathers_per_micro_step,
    overlap_sweep,
    ring_factor,
    seed_checks,
    seed_comparison,
    seed_traffic,
    step_time,
    zero_traffic,
)
from workshop.comms.zero3_calls import Zero3Calls, Zero3Settings, per_step_calls, zero3_calls

__all__ = [
    "OPS",
    "SIZES_MB",
    "LocalRun",
    "SeedRow",
    "StepPrediction",
    "Traffic",
    "Zero3Calls",
    "Zero3Settings",
    "bandwidth_sweep",
    "bus_factor",
    "collective_bandwidth",
    "collective_time",
    "fit_collectives",
    "gathers_per_micro_step",
    "local_comparison",
    "loopback_bytes",
    "main",
    "model_report",
    "netsim_check",
    "netsim_collective_bench",
    "overlap_sweep",
    "per_step_calls",
    "predict_from_single_rank",
    "ring_factor",
    "run_collective_bench",
    "run_training",
    "seed_checks",
    "seed_comparison",
    "seed_traffic",
    "step_time",
    "train_argv",
    "zero3_calls",
    "zero_traffic",
]
