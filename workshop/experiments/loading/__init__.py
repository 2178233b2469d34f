"""Sharded loading, measured: naive vs meta device vs ZeRO-3 partitioned construction.

Each loading method runs in fresh processes under torchrun (so every rank's memory is its own and a real
process group exists), samples its resident memory while it loads, and reports one JSON per rank. The
driver runs methods x world sizes and gathers a table the notebook and the benchmark print.

Methods:
  naive         build the model with real (random) weights, then read the whole state dict and copy it in:
                the pre-meta-device behaviour whose peak is about twice the model.
  meta          `from_pretrained`: transformers 5 always builds on the meta device and fills it from the
                file (its `low_cpu_mem_usage` flag is accepted and ignored). Every rank holds the full model.
  zero3         keep `HfDeepSpeedConfig` alive, then `from_pretrained`: built inside `deepspeed.zero.Init`,
                each rank keeps 1/N of every parameter; rank 0 maps every shard while it fills the model.
  zero3-stream  the same construction (`from_config` while the config is alive), then filled one shard at a
                time, so rank 0 maps one shard, not the whole checkpoint.


One module per seam: checkpoint (write, verify, preflight), rss (measuring), worker (one rank of one
method), experiment (the driver and its table), pitfalls (zero.Init's failure modes), ranks (what torchrun
starts).
"""

from __future__ import annotations

from workshop.experiments.loading.checkpoint import (
    DTYPES,
    GB,
    CheckpointInfo,
    check_world_size,
    checkpoint_preset,
    preflight_checkpoint,
    verify_checkpoint,
    write_checkpoint,
)
from workshop.experiments.loading.experiment import (
    bench,
    format_table,
    planner_prediction,
    ratios,
    run_experiment,
    run_method,
    summarize,
)
from workshop.experiments.loading.pitfalls import PITFALLS, run_pitfall_here, show_pitfall, show_pitfalls
from workshop.experiments.loading.rss import PeakRSS, rss_bytes, rss_split, ru_maxrss_bytes
from workshop.experiments.loading.worker import (
    METHODS,
    RankReport,
    ds_config,
    load_shards_zero3,
    run_worker,
    touch_weights,
)

__all__ = [
    "DTYPES",
    "GB",
    "METHODS",
    "PITFALLS",
    "CheckpointInfo",
    "PeakRSS",
    "RankReport",
    "bench",
    "check_world_size",
    "checkpoint_preset",
    "ds_config",
    "format_table",
    "load_shards_zero3",
    "planner_prediction",
    "preflight_checkpoint",
    "ratios",
    "rss_bytes",
    "rss_split",
    "ru_maxrss_bytes",
    "run_experiment",
    "run_method",
    "run_pitfall_here",
    "run_worker",
    "show_pitfall",
    "show_pitfalls",
    "summarize",
    "touch_weights",
    "verify_checkpoint",
    "write_checkpoint",
]
