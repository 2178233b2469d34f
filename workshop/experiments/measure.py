"""How every benchmark measures: repeated runs kept whole (Stats), A/B pairs run back to back
(paired_ratios), interleaved rounds, model FLOPs and MFU against this CPU's peaks, and results saved with the
machine they were measured on.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from workshop.errors import WorkshopError, check_positive
from workshop.plan import hardware
from workshop.plan.hardware import detect, machine_peaks
from workshop.train.guard import versions


class StatsRecord(TypedDict):
    """Stats as a result JSON stores it (Stats.as_dict())."""

    n: int
    median: float
    min: float
    max: float
    spread_pct: float
    values: list[float]


@dataclass
class Stats:
    """The distribution of one metric over repeated runs: never a single timing."""

    n: int
    median: float
    min: float
    max: float
    spread_pct: float  # (max - min) / median, in percent
    values: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Stats:
        xs = [float(v) for v in values if v is not None]
        if not xs:
            raise WorkshopError("no measurements to summarize (every run failed or produced no steps)")
        med = statistics.median(xs)
        spread = 100 * (max(xs) - min(xs)) / med if med else 0.0
        return cls(len(xs), med, min(xs), max(xs), round(spread, 1), xs)

    def as_dict(self) -> StatsRecord:
        """dataclasses.asdict(self), typed."""
        return {
            "n": self.n,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "spread_pct": self.spread_pct,
            "values": list(self.values),
        }


def paired_ratios(a: Sequence[float | None], b: Sequence[float | None]) -> Stats:
    """a[i] / b[i] for runs made back to back in the same round: drift between rounds cancels in each
    ratio."""
    if len(a) != len(b):
        raise WorkshopError(f"paired ratios need as many A runs as B runs, got {len(a)} and {len(b)}")
    return Stats.of([x / y for x, y in zip(a, b) if x is not None and y])


def interleave(names: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """The run order: every variant once per round, rounds one after another (A B A B ...)."""
    check_positive("rounds", rounds)
    if len(set(names)) != len(names) or not names:
        raise WorkshopError(f"variants must be distinct and non-empty, got {list(names)}")
    return [(r, name) for r in range(rounds) for name in names]


def mfu(tokens_per_s: float, flops_token: float, peak_tflops: float) -> float:
    """Model FLOPs utilization in percent: useful model FLOPs per second over the theoretical peak."""
    check_positive("peak_tflops", peak_tflops)
    return 100.0 * tokens_per_s * flops_token / (peak_tflops * 1e12)


class PeaksSummary(TypedDict):
    """`peaks_for()`'s record: "peaks" in the training benchmarks' JSON (recipes, engine, precision)."""

    cpu_model: str
    amx: bool
    isa_class: str
    cores: int  # the cores the peaks are for
    clock_ghz: float | None
    why: str
    bf16_tflops: float | None  # this CPU's bf16 path (None: no clock known)
    bf16_path: str | None
    fp32_tflops: float | None
    fp32_path: str | None
    amx_bf16_tflops: float  # the same cores with AMX, at this machine's clock (hardware.machine_peaks)


def peaks_for(cores: int) -> PeaksSummary:
    """bf16/fp32 peak of the ISA present, and the AMX bf16 peak the same cores would have on a Xeon (chapter
    01)."""

    d = detect(probe_onednn=False)
    p = machine_peaks(d, cores=min(cores, d["cores"]))
    return {
        "cpu_model": d["cpu_model"],
        "amx": d["amx"],
        "isa_class": d["isa_class"],
        "cores": p["amx_reference"].cores,
        "clock_ghz": d.get("clock_ghz"),
        "why": d["why"],
        "bf16_tflops": p["bf16"].tflops if p["bf16"] else None,
        "bf16_path": p["bf16"].path if p["bf16"] else None,
        "fp32_tflops": p["fp32"].tflops if p["fp32"] else None,
        "fp32_path": p["fp32"].path if p["fp32"] else None,
        "amx_bf16_tflops": p["amx_reference"].tflops,
    }


def save(
    name: str, result: Mapping[str, Any], results_dir: str | Path, json_out: str | Path | None = None
) -> Path:
    path = Path(json_out) if json_out else Path(results_dir) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)

    if not any(result.get(k) for k in ("peaks", "machine", "env")):  # every stored number names its machine
        d = hardware.detect(probe_onednn=False)
        result = {**result, "machine": {k: d.get(k) for k in ("cpu_model", "isa_class", "cores", "amx")}}
    result = {
        **result,
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "host_cores": os.cpu_count(),
        "versions": versions(),
    }
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path
