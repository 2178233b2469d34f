"""Measured GEMM TFLOPS beside the theoretical peak (chapter 01's table and figure, gemm.json): square
matmuls timed at every size, precision and thread count, every repeat kept, then summarized like with like.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, NotRequired, TypedDict

from workshop.errors import WorkshopError, check_positive
from workshop.lang import N_, _
from workshop.plan.hardware import Detection, Peak, machine_peaks, physical_cores
from workshop.plan.timer import seconds_per_call


class GemmCell(TypedDict):
    """GemmResult.as_dict(): one row of chapter 01's GEMM table (and of gemm.json's "results")."""

    size: int
    dtype: str
    threads: int
    tflops: list[float]  # every repeat
    median_tflops: float
    best_tflops: float
    worst_tflops: float


@dataclass
class GemmResult:
    """One (size, dtype, threads) cell: every repeat kept, so the spread is visible, never one timing."""

    size: int
    dtype: str
    threads: int
    tflops: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.tflops)

    @property
    def best(self) -> float:
        return max(self.tflops)

    @property
    def worst(self) -> float:
        return min(self.tflops)

    def as_dict(self) -> GemmCell:
        return {
            "size": self.size,
            "dtype": self.dtype,
            "threads": self.threads,
            "tflops": list(self.tflops),
            "median_tflops": self.median,
            "best_tflops": self.best,
            "worst_tflops": self.worst,
        }


_DTYPES = ("bf16", "fp32")


def gemm_benchmark(
    sizes: Sequence[int] = (512, 1024, 2048),
    dtypes: Sequence[str] = _DTYPES,
    threads: Sequence[int] | None = None,
    *,
    warmup: int = 2,
    repeats: int = 5,
    min_seconds: float = 0.05,
) -> list[GemmResult]:
    """Square n x n GEMMs: each repeat times enough back-to-back matmuls to last >= min_seconds.

    Returns one GemmResult per (size, dtype, threads), every repeat in TFLOPS (2 n^3 FLOP / seconds / 1e12).
    Threads default to (1, physical cores). Warm-up runs first so oneDNN's kernel generation (JIT) and
    page faults are not timed; the median and best are reported because VM timings swing 2x run to run."""
    import torch

    threads = list(threads or sorted({1, physical_cores()}))
    for n in sizes:
        check_positive("GEMM size", n)
    for t in threads:
        check_positive("threads", t)
    check_positive("repeats", repeats)
    for dt in dtypes:
        if dt not in _DTYPES:
            raise WorkshopError(f"unknown dtype {dt!r}; allowed: {', '.join(_DTYPES)}")
    torch_dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}
    before = torch.get_num_threads()
    results = []
    try:
        for t in threads:
            torch.set_num_threads(t)
            for dt in dtypes:
                for n in sizes:
                    a = torch.randn(n, n, dtype=torch_dtype[dt])
                    b = torch.randn(n, n, dtype=torch_dtype[dt])
                    for _ in range(warmup):
                        torch.mm(a, b)
                    cell = GemmResult(n, dt, t)
                    for _ in range(repeats):
                        seconds = seconds_per_call(
                            partial(torch.mm, a, b), min_seconds=min_seconds, min_calls=2
                        )
                        cell.tflops.append(2 * n**3 / seconds / 1e12)
                    results.append(cell)
    finally:
        torch.set_num_threads(before)
    return results


class GemmPeaks(TypedDict):
    """The three peaks behind GemmSummary's percentages, each Peak as a dict (None: no such path here)."""

    bf16: dict[str, Any] | None
    fp32: dict[str, Any] | None
    amx_reference: dict[str, Any]


class GemmSummary(TypedDict):
    """`summarize()`'s record: the numbers chapter 01 quotes (and gemm.json stores), at one thread count."""

    amx: bool
    isa_class: str
    why: str
    threads: int | None  # the thread count both precisions are compared at (None: nothing measured)
    bf16_tflops: float | None  # median of the best bf16 cell at `threads`
    bf16_best_tflops: float | None
    bf16_size: int | None
    fp32_tflops: float | None
    fp32_best_tflops: float | None
    fp32_size: int | None
    bf16_over_fp32: float | None
    bf16_over_fp32_by_threads: dict[int, float]
    peak_bf16_tflops: float | None
    peak_bf16_path: str | None
    peak_fp32_tflops: float | None
    peak_fp32_path: str | None
    peak_amx_bf16_tflops: float
    bf16_pct_of_peak: float | None
    fp32_pct_of_peak: float | None
    bf16_pct_of_amx_peak: float | None
    clock_ghz: float | None
    clock_source: str | None
    peaks: GemmPeaks
    peaks_by_threads: dict[int, dict[str, float | None]]  # peak_lines() per thread count
    note: str | None  # set when a measurement is above its peak
    bf16_samples: NotRequired[
        list[float]
    ]  # every repeat of the two compared cells (report.verdict judges them)
    fp32_samples: NotRequired[list[float]]


def _best(results: list[GemmResult], dtype: str, threads: int | None) -> GemmResult | None:
    """The fastest cell (by median) of one precision at one thread count."""
    cells = [r for r in results if r.dtype == dtype and r.threads == threads]
    return max(cells, key=lambda r: r.median) if cells else None


def _ratios(results: list[GemmResult], counts: list[int]) -> dict[int, float]:
    """bf16 over fp32 TFLOPS (best cells, 3 significant digits) at every thread count measured in both."""
    ratios: dict[int, float] = {}
    for t in counts:
        b, f = _best(results, "bf16", t), _best(results, "fp32", t)
        if b and f:
            ratios[t] = float(f"{b.median / f.median:.3g}")
    return ratios


def summarize(d: Detection, results: list[GemmResult]) -> GemmSummary:
    """The numbers the chapter quotes: both precisions' TFLOPS at ONE thread count, their ratio, and % of each
    peak (TFLOPS). Like with like: bf16 and fp32 are compared at the same thread count (each at its best size
    there), the one whose best cell is fastest. Not "the most threads": on a shared 2-core VM a second thread
    often loses to a neighbour's process. The ratio at every thread count is kept too
    (`bf16_over_fp32_by_threads`), and the peaks are those of the thread count used."""

    counts = sorted({r.threads for r in results})
    ratios = _ratios(results, counts)
    top = max(results, key=lambda r: r.median) if results else None
    threads = top.threads if top else None
    bf16, fp32 = _best(results, "bf16", threads), _best(results, "fp32", threads)
    peaks = machine_peaks(d, cores=min(threads, d["cores"])) if threads else machine_peaks(d)
    pb, pf, pa = peaks["bf16"], peaks["fp32"], peaks["amx_reference"]

    def pct(x: float | None, p: Peak | None) -> float | None:
        return round(100 * x / p.tflops, 1) if (x is not None and p) else None

    bf16_t = bf16.median if bf16 else None
    fp32_t = fp32.median if fp32 else None
    out: GemmSummary = {
        "amx": d["amx"],
        "isa_class": d["isa_class"],
        "why": d["why"],
        "threads": threads,
        "bf16_tflops": bf16_t,
        "bf16_best_tflops": bf16.best if bf16 else None,
        "bf16_size": bf16.size if bf16 else None,
        "fp32_tflops": fp32_t,
        "fp32_best_tflops": fp32.best if fp32 else None,
        "fp32_size": fp32.size if fp32 else None,
        "bf16_over_fp32": ratios.get(threads) if threads is not None else None,
        "bf16_over_fp32_by_threads": ratios,
        "peak_bf16_tflops": pb.tflops if pb else None,
        "peak_bf16_path": pb.path if pb else None,
        "peak_fp32_tflops": pf.tflops if pf else None,
        "peak_fp32_path": pf.path if pf else None,
        "peak_amx_bf16_tflops": pa.tflops,
        "bf16_pct_of_peak": pct(bf16_t, pb),
        "fp32_pct_of_peak": pct(fp32_t, pf),
        "bf16_pct_of_amx_peak": pct(bf16_t, pa),
        "clock_ghz": d.get("clock_ghz"),
        "clock_source": d.get("clock_source"),
        "peaks": {
            "bf16": asdict(pb) if pb else None,
            "fp32": asdict(pf) if pf else None,
            "amx_reference": asdict(pa),
        },
        "peaks_by_threads": {t: peak_lines(d, t) for t in counts},
        "note": None,
    }
    if bf16 and fp32:
        out["bf16_samples"], out["fp32_samples"] = list(bf16.tflops), list(fp32.tflops)
    over = [(x, p) for x, p in ((bf16_t, pb), (fp32_t, pf)) if x is not None and p and x > p.tflops]
    if over:
        out["note"] = over_peak(*max(over, key=lambda o: o[0] / o[1].tflops), d.get("clock_source"))
    return out


# No x86 server core runs a sustained clock above this (EPYC 9175F and Xeon 6 boost to ~5 GHz): a measured
# rate that needs more than this at its path's FLOP per cycle has a wrong FLOP per cycle, not a wrong clock.
MAX_CLOCK_GHZ = 5.0


def needed_clock_ghz(tflops: float, peak: Peak) -> float:
    """The clock (GHz) at which `peak`'s cores and FLOP per cycle deliver `tflops`."""
    return tflops * 1e12 / (peak.cores * peak.flops_per_cycle * 1e9)


def over_peak(tflops: float, peak: Peak, clock_source: str | None) -> str:
    """Why a measured rate exceeds its peak, decided from the numbers: a share above 100 % of a peak is a
    wrong clock (the clock it needs is one a core can run) or a wrong FLOP per cycle (no core runs that
    clock). Returns one sentence naming which, with the clock the rate needs."""
    need = needed_clock_ghz(tflops, peak)
    said = {"x": tflops / peak.tflops, "need": need, "fpc": peak.flops_per_cycle, "path": peak.path}
    if need <= MAX_CLOCK_GHZ:
        return _(
            "above 100% of peak (x{x:.2f}): the clock is wrong, not the peak: at {fpc} FLOP/cycle per core "
            "({path}) this rate needs {need:.2f} GHz, more than the {clock:g} GHz used ({source}; VMs report "
            "the base clock, cores boost higher)"
        ).format(**said, clock=peak.clock_ghz, source=_(clock_source) if clock_source else clock_source)
    return _(
        "above 100% of peak (x{x:.2f}): the peak is wrong, not the clock: at {fpc} FLOP/cycle per core "
        "({path}) this rate needs {need:.2f} GHz, beyond any x86 core ({max:g} GHz), so this CPU does more "
        "FLOP per cycle than the {path} row says"
    ).format(**said, max=MAX_CLOCK_GHZ)


def peak_lines(d: Detection, threads: int) -> dict[str, float | None]:
    """The peaks a figure panel for `threads` threads draws: this CPU's bf16 and fp32 paths and AMX's."""
    peaks = machine_peaks(d, cores=min(threads, d["cores"]))
    return {
        N_("bf16 peak here"): peaks["bf16"].tflops if peaks["bf16"] else None,
        N_("fp32 peak here"): peaks["fp32"].tflops if peaks["fp32"] else None,
        N_("AMX peak, same cores"): peaks["amx_reference"].tflops,
    }
