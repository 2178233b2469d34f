"""`workshop bench gemm`: chapter 01's GEMM sweep, kept with its verdict."""

from __future__ import annotations

from typing import Any

from workshop.plan.gemm import GemmCell, GemmSummary, gemm_benchmark, summarize
from workshop.plan.hardware import detect


class GemmBench(GemmSummary):
    """`gemm()`'s record: benchmarks/results/gemm.json."""

    benchmark: str
    results: list[GemmCell]
    detect: dict[str, Any]  # the part of detect() the verdict depends on


def gemm(repeats: int = 5) -> GemmBench:
    """Chapter 01's GEMM sweep, saved with its verdict against the AMX peak."""

    d = detect()
    results = gemm_benchmark(sizes=(256, 512, 1024, 2048), threads=sorted({1, d["cores"]}), repeats=repeats)
    return {
        "benchmark": "gemm",
        **summarize(d, results),
        "results": [r.as_dict() for r in results],
        "detect": {
            k: d[k] for k in ("cpu_model", "cores", "clock_ghz", "amx", "avx512_bf16", "onednn_bf16_impl")
        },
    }
