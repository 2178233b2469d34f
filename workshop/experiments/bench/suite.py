"""Run the named benchmarks of `workshop bench` (the training ones interleaved in one series of rounds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workshop.experiments.bench.config import TRAINING_BENCHMARKS, BenchConfig
from workshop.experiments.bench.gemm import gemm
from workshop.experiments.bench.ipex import ipex
from workshop.experiments.bench.training import training_benchmarks
from workshop.experiments.bench.workbook import workbook_smoke


def run_benchmarks(
    names: Sequence[str], cfg: BenchConfig, *, ipex_python: str | None = None
) -> dict[str, Mapping[str, Any]]:
    """Each named benchmark's result record, by name (not yet saved); training ones share their rounds."""
    done: dict[str, Mapping[str, Any]] = {}
    training = [n for n in names if n in TRAINING_BENCHMARKS]
    if training:
        done.update(training_benchmarks(training, cfg))
    if "gemm" in names:
        done["gemm"] = gemm()
    if "ipex" in names:
        done["ipex"] = ipex(cfg, ipex_python)
    if "workbook" in names:
        done["workbook"] = workbook_smoke(
            Path(cfg.out_dir) / "workbook", timings_path=Path(cfg.results_dir) / "timings.json"
        )
    return done
