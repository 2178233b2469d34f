"""`workshop bench ceiling`: the training step's FLOP rate as a share of THIS machine's own matmul ceiling.

MFU against a datasheet peak mixes two gaps: how far the GEMM library is from the peak (clock, ISA, shapes)
and how far the training step is from the GEMMs it is made of (framework overhead, optimizer, attention,
memory). Only the second is ours to close, so one run measures both on the same cores: the GEMM rate at the
model's own matmul shapes (tokens per micro-batch x the preset's q/k/v/o, gate/up/down and lm_head weights,
forward and both backward GEMMs), with the ranks and threads the training uses, running at the same time; then
the training step's model-FLOP rate, once per lever, every lever against its base in interleaved rounds.

The modules, in the order a run uses them: `shapes` (the model's matmuls), `probe` (the GEMM ceiling, one
child process per rank), `machine` (CPU, ISA path, peaks), `levers` (the catalogue), `config` (what a run is
asked for and its plan), `rounds` (the interleaved rounds), `result` (the schema and summaries), `table`
(chapter 04's rows, table and figure). Chapter 04 calls the names below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workshop.experiments.ceiling.config import CeilingConfig
    from workshop.experiments.ceiling.levers import LEVERS
    from workshop.experiments.ceiling.rounds import run
    from workshop.experiments.ceiling.table import figure, format_table, load, rows

# Imported on first use (PEP 562): every GEMM probe rank runs `python -m workshop.experiments.ceiling`,
# which imports this package first, and `table` brings matplotlib (about 0.6 s of CPU per probe rank).
_FROM = {
    "CeilingConfig": "config",
    "LEVERS": "levers",
    "run": "rounds",
    "figure": "table",
    "format_table": "table",
    "load": "table",
    "rows": "table",
}

__all__ = ["LEVERS", "CeilingConfig", "figure", "format_table", "load", "rows", "run"]


def __getattr__(name: str):
    if name in _FROM:
        return getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
