"""How a CPU's matmul rate grows with the cores given to it: measured at 1, 2, ... threads (all the machine
has), then carried to a large host by a power law fitted to the measurements, with the range the repeats
allow.

Why measured: a vCPU on EC2 is a hyperthread, and two hyperthreads of one core share its one AMX unit (an
AMX VM with 2 vCPUs ran a bf16 GEMM at 1.105 TFLOPS on 1 thread and 1.105 on 2). A constant such as "half of
linear" hides that; the curve shows it, and the planner's thread-scaling factor for a 96-core host is the
curve's extrapolation, stated with how far beyond the measured cores it reaches.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypedDict

from workshop.errors import WorkshopError, check_positive
from workshop.lang import _
from workshop.plan.timer import seconds_per_call


class CurveRecord(TypedDict):
    """A thread-scaling curve as a result JSON stores it."""

    dtype: str
    shape: list[int]  # m, k, n of the timed GEMM
    threads: list[int]
    tflops: dict[str, list[float]]  # str(threads) -> every repeat


@dataclass(frozen=True)
class Scaling:
    """The per-core rate at `cores` as a share of one core's (1.0 = linear), with the range and its basis."""

    cores: int
    value: float
    low: float
    high: float
    measured_up_to: int  # the most threads measured: beyond it the value is extrapolated
    exponent: float  # TFLOPS grows as threads ** exponent (1 = linear)

    def describe(self) -> str:
        how = (
            _("within the 1-{measured} cores measured").format(measured=self.measured_up_to)
            if self.cores <= self.measured_up_to
            else _("extrapolated {x:.0f}x beyond the {measured} cores measured").format(
                x=self.cores / self.measured_up_to, measured=self.measured_up_to
            )
        )
        return _(
            "{value:.2f} of linear at {cores} cores (range {low:.2f}-{high:.2f}; "
            "TFLOPS ~ threads^{exponent:.2f}; {how})"
        ).format(
            value=self.value, cores=self.cores, low=self.low, high=self.high, exponent=self.exponent, how=how
        )


def measure_curve(
    m: int,
    k: int,
    n: int,
    threads: Sequence[int],
    *,
    dtype: str = "bf16",
    repeats: int = 3,
    min_seconds: float = 0.2,
) -> CurveRecord:
    """An (m x k) @ (k x n) GEMM timed at every thread count, `repeats` times each (rounds interleaved, so a
    neighbour's burst lands on every thread count rather than one)."""
    import torch

    for name, v in (("m", m), ("k", k), ("n", n), ("repeats", repeats), ("min_seconds", min_seconds)):
        check_positive(name, v)
    for t in threads:
        check_positive("threads", t)
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}.get(dtype)
    if dt is None:
        raise WorkshopError(f"unknown dtype {dtype!r}; allowed: bf16, fp32")
    a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
    before = torch.get_num_threads()
    out: dict[str, list[float]] = {str(t): [] for t in threads}
    try:
        for t in threads:  # warm-up: oneDNN's kernel generation, page faults
            torch.set_num_threads(t)
            torch.mm(a, b)
        for _ in range(repeats):
            for t in threads:
                torch.set_num_threads(t)
                s = seconds_per_call(partial(torch.mm, a, b), min_seconds=min_seconds, min_calls=2)
                out[str(t)].append(2 * m * k * n / s / 1e12)
    finally:
        torch.set_num_threads(before)
    return {"dtype": dtype, "shape": [m, k, n], "threads": list(threads), "tflops": out}


def _exponent(points: Mapping[int, float]) -> float:
    """Least-squares slope of log TFLOPS against log threads (1.0: linear); 1 point: assume linear."""
    xs = [math.log(t) for t in points]
    ys = [math.log(v) for v in points.values()]
    if len(xs) < 2:
        return 1.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 1.0


def _check_curve(curve: Mapping) -> dict[int, list[float]]:
    try:
        pts = {int(t): [float(v) for v in vs] for t, vs in curve["tflops"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise WorkshopError(
            "thread-scaling curve: expected {'tflops': {threads: [TFLOPS, ...]}}, got "
            f"{str(curve)[:80]!r}"
        ) from None
    if 1 not in pts or not all(pts.values()) or min(min(v) for v in pts.values()) <= 0:
        raise WorkshopError("thread-scaling curve: needs positive TFLOPS samples at 1 thread and beyond")
    return pts


def per_core(curve: Mapping) -> dict[int, float]:
    """Median TFLOPS per thread at t threads over the median at 1 thread (1.0 = linear), per thread count."""
    pts = _check_curve(curve)
    one = statistics.median(pts[1])
    return {t: statistics.median(v) / (t * one) for t, v in sorted(pts.items())}


def scaling_at(curve: Mapping, cores: int) -> Scaling:
    """The per-core share at `cores` from the curve's power law: medians for the value; the range from the
    slowest 1-thread repeat against the fastest many-thread ones and the other way round; capped at linear."""
    check_positive("cores", cores)
    pts = _check_curve(curve)
    top = max(pts)
    med = {t: statistics.median(v) for t, v in pts.items()}
    hi_pts = {t: (min(v) if t == 1 else max(v)) for t, v in pts.items()}
    lo_pts = {t: (max(v) if t == 1 else min(v)) for t, v in pts.items()}

    def share(points: Mapping[int, float]) -> tuple[float, float]:
        e = _exponent(points)
        return min(1.0, cores ** (e - 1)), e

    value, e = share(med)
    low, high = share(lo_pts)[0], share(hi_pts)[0]
    return Scaling(cores, value, min(low, value), max(high, value), top, e)


def curve_from_gemm_cells(cells: Sequence[Mapping], dtype: str = "bf16") -> CurveRecord | None:
    """A curve from gemm.json-style cells (size, dtype, threads, every repeat): the largest square size
    measured at every thread count, or None when fewer than two thread counts were measured."""
    rows = [c for c in cells if c.get("dtype") == dtype]
    sizes: dict[int, dict[int, list[float]]] = {}
    for c in rows:
        sizes.setdefault(int(c["size"]), {})[int(c["threads"])] = [float(x) for x in c["tflops"]]
    full = {n: by_t for n, by_t in sizes.items() if 1 in by_t and len(by_t) >= 2}
    if not full:
        return None
    n = max(full)
    ts = sorted(full[n])
    return {"dtype": dtype, "shape": [n, n, n], "threads": ts, "tflops": {str(t): full[n][t] for t in ts}}
