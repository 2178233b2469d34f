"""The driver: methods x world sizes, one torchrun each, gathered into a table with chapter 01's planner
beside every measured peak; `bench` writes it all as JSON.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from workshop.errors import check_choice
from workshop.experiments.loading.checkpoint import (
    _BYTES_PER,
    DTYPES,
    GB,
    check_world_size,
    preflight_checkpoint,
    verify_checkpoint,
    write_checkpoint,
)
from workshop.experiments.loading.worker import METHODS, RankMeasures, RankRecord
from workshop.launch.procs import run_captured
from workshop.launch.torchrun import rank_env, torchrun_command
from workshop.plan.memory import architecture, plan_memory
from workshop.plan.models import build_config
from workshop.train.guard import versions


def _worker_env(nproc: int, threads: int | None) -> dict:
    """The ranks' environment (workshop.launch.torchrun.rank_env) plus one setting of this experiment's
    own."""

    # glibc otherwise keeps large freed buffers (ZeRO-3's gathered modules) in its heap, where RSS still
    # counts them; a fixed threshold returns them to the OS. Same for every method, so the comparison is fair.
    extra = {"MALLOC_MMAP_THRESHOLD_": os.environ.get("MALLOC_MMAP_THRESHOLD_", "65536")}
    return rank_env(
        threads or max(1, (os.cpu_count() or 1) // nproc), extra, nproc_per_node=nproc, cpu_only=True
    )


def run_method(
    checkpoint: str | Path,
    method: str,
    nproc: int,
    *,
    dtype: str | None = None,
    out_dir: str | Path,
    low_cpu_mem_usage: bool | None = None,
    verify: bool = True,
    threads: int | None = None,
    timeout: float = 1800,
) -> list[RankRecord]:
    """Launch one method on `nproc` ranks with torchrun; returns each rank's record in rank order (memory in
    GB, load time in s)."""
    check_choice("method", method, METHODS)
    info = verify_checkpoint(checkpoint)
    dtype = dtype or info.dtype
    check_choice("dtype", dtype, DTYPES)
    check_world_size(nproc, model_bytes=info.numel * _BYTES_PER[dtype], method=method)
    out = Path(out_dir) / f"{method}-n{nproc}"
    for old in out.glob("rank*.json"):
        old.unlink()

    spec = {
        "method": method,
        "checkpoint": str(checkpoint),
        "out_dir": str(out),
        "dtype": dtype,
        "low_cpu_mem_usage": low_cpu_mem_usage,
        "verify": verify,
    }
    cmd = torchrun_command(
        ["worker", json.dumps(spec)], module="workshop.experiments.loading", nproc_per_node=nproc
    )
    proc = run_captured(cmd, env=_worker_env(nproc, threads), timeout=timeout)
    (out / "log.txt").parent.mkdir(parents=True, exist_ok=True)
    (out / "log.txt").write_text(proc.stdout + proc.stderr)
    reports: list[RankRecord] = [
        json.loads((out / f"rank{r}.json").read_text())
        for r in range(nproc)
        if (out / f"rank{r}.json").exists()
    ]
    if proc.returncode != 0 or len(reports) != nproc:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{method} on {nproc} rank(s) failed (exit {proc.returncode}); log tail:\n{tail}")
    return reports


def run_experiment(
    checkpoint: str | Path,
    *,
    methods=METHODS,
    world_sizes=(1, 2),
    out_dir: str | Path,
    verify: bool = True,
    progress: bool = True,
) -> list[RankRecord]:
    """Every method on every world size, one torchrun each; returns one record per rank (memory in GB, load
    time in s, parameter counts)."""
    for m in methods:
        check_choice("method", m, METHODS)
    for n in world_sizes:
        check_world_size(n)
    rows: list[RankRecord] = []
    for method in methods:
        for n in world_sizes:
            t0 = time.perf_counter()
            got = run_method(checkpoint, method, n, out_dir=out_dir, verify=verify)
            if progress:
                peaks = ", ".join(f"{r['peak_rss_gb']:.2f}" for r in got)
                print(
                    f"{method:>12} N={n}: peak RSS per rank [{peaks}] GB  ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
            rows.extend(got)
    return rows


class LoadPrediction(TypedDict):
    """The planner's loading numbers for one rank, GB."""

    runtime_gb: float  # the per-rank process overhead the planner assumes
    keep_gb: float  # the weights a rank keeps
    peak_rank0_gb: float
    peak_other_gb: float
    per_node_gb: float  # every rank on one node at its peak, the mapped file pages counted once
    file_gb: float  # of those, the file pages the page cache holds once for every rank that maps them


def planner_prediction(
    model: str, world_size: int, method: str, *, dtype: str = "bf16", shard_bytes: int = 0
) -> LoadPrediction:
    """Chapter 01's planner, applied to loading: what each rank keeps, and the peak on rank 0 and the others.

    The planner's `params` component is the weights a rank keeps (1/N under ZeRO-3); its `runtime` is the
    per-rank process overhead it assumes. Loading adds a transient: naive holds a second full copy (read
    through one mapped shard at a time); the transformers ZeRO-3 path maps every shard on rank 0; streaming
    maps one shard, and every rank gathers one module at a time (the planner's largest layer).
    """

    check_choice("method", method, METHODS)
    plan = plan_memory(
        model, world_size=world_size, zero_stage=3 if method.startswith("zero3") else 0, dtype=dtype
    )
    c = plan.components
    full = plan_memory(model, world_size=1, zero_stage=0, dtype=dtype).components["params"]
    layer = architecture(model).largest_layer_params * _BYTES_PER[dtype]
    extra0, extra = {
        "naive": (full + shard_bytes, full + shard_bytes),
        "meta": (0, 0),
        "zero3": (full + layer, layer),
        "zero3-stream": (shard_bytes + layer, layer),
    }[method]
    # which part of each peak is mapped file pages: meta's weights are the file's pages; naive and streaming
    # map one shard at a time, zero3 maps every shard on rank 0; the page cache holds a page once however many
    # ranks map it, so a node's total counts them once (the ranks map the same shard at the same time)
    file0, file_other = {
        "naive": (shard_bytes, shard_bytes),
        "meta": (c["params"], c["params"]),
        "zero3": (full, 0),
        "zero3-stream": (shard_bytes, 0),
    }[method]
    peak0, peak_other = c["runtime"] + c["params"] + extra0, c["runtime"] + c["params"] + extra
    node = (peak0 - file0) + (world_size - 1) * (peak_other - file_other) + max(file0, file_other)
    return {
        "runtime_gb": c["runtime"] / GB,
        "keep_gb": c["params"] / GB,
        "peak_rank0_gb": peak0 / GB,
        "peak_other_gb": peak_other / GB,
        "per_node_gb": node / GB,
        "file_gb": max(file0, file_other) / GB,
    }


class LoadingRow(RankMeasures):
    """One line of chapter 03's loading table (loading.json "rows"): a rank's measurements, planner beside."""

    share: float  # local_numel / full_numel
    plan_peak_gb: NotRequired[float]  # with a model: the planner's peak for this rank
    plan_load_gb: NotRequired[float]  # ... with this rank's measured baseline for the planner's runtime
    plan_keep_gb: NotRequired[float]


def summarize(rows: list[RankRecord], *, model: str | None = None, shard_bytes: int = 0) -> list[LoadingRow]:
    """One line per (method, ranks, rank) with the planner's numbers beside the measured ones.

    The planner assumes a training process's overhead (its `runtime`); `plan_load_gb` swaps in the measured
    baseline of this rank, so the comparison is about the model bytes, not the interpreter.
    """
    out: list[LoadingRow] = []
    for r in rows:
        line: LoadingRow = {
            "method": r["method"],
            "world_size": r["world_size"],
            "rank": r["rank"],
            "peak_rss_gb": r["peak_rss_gb"],
            "peak_anon_gb": r["peak_anon_gb"],
            "peak_file_gb": r["peak_file_gb"],
            "ru_maxrss_gb": r["ru_maxrss_gb"],
            "end_rss_gb": r["end_rss_gb"],
            "used_rss_gb": r["used_rss_gb"],
            "load_s": r["load_s"],
            "local_numel": r["local_numel"],
            "full_numel": r["full_numel"],
            "model_bytes": r["model_bytes"],
            "weights_match": r["weights_match"],
            "baseline_rss_gb": r["baseline_rss_gb"],
            "share": r["local_numel"] / r["full_numel"],
        }
        if model is not None:
            pred = planner_prediction(
                model, r["world_size"], r["method"], dtype=r["dtype"], shard_bytes=shard_bytes
            )
            peak = pred["peak_rank0_gb"] if r["rank"] == 0 else pred["peak_other_gb"]
            line["plan_peak_gb"] = peak
            line["plan_load_gb"] = peak - pred["runtime_gb"] + r["baseline_rss_gb"]
            line["plan_keep_gb"] = pred["keep_gb"]
        out.append(line)
    return out


def ratios(
    summary: list[LoadingRow], *, world_size: int = 2, against: str = "naive"
) -> dict[str, list[float]]:
    """Peak RSS of each method over `against`'s, rank by rank, at one world size (the issue's 0.6 test):
    method -> one ratio (x) per rank."""
    base = {
        r["rank"]: r["peak_rss_gb"]
        for r in summary
        if r["method"] == against and r["world_size"] == world_size
    }
    out: dict[str, list[float]] = {}
    for r in sorted(summary, key=lambda r: r["rank"]):
        if r["world_size"] == world_size and r["rank"] in base:
            out.setdefault(r["method"], []).append(r["peak_rss_gb"] / base[r["rank"]])
    return out


def format_table(summary: list[LoadingRow]) -> str:
    """A plain-text table of `summarize()`'s rows (the notebook prints it; no pandas needed): resident memory
    in GB (peak, anonymous, file-backed, ru_maxrss, kept, used), load time in s, the share of the weights."""
    has_plan = any("plan_peak_gb" in r for r in summary)
    head = (
        f"{'method':>12} {'N':>2} {'rank':>4} {'peak GB':>8} {'anon':>6} {'file':>6} {'maxrss':>7} "
        f"{'kept':>6} {'used':>6} {'load s':>7} {'share':>6} {'match':>5}"
    )
    if has_plan:
        head += f" {'plan GB':>8} {'plan*':>6}"
    lines = [head, "-" * len(head)]
    for r in summary:
        line = (
            f"{r['method']:>12} {r['world_size']:>2} {r['rank']:>4} {r['peak_rss_gb']:>8.2f} "
            f"{r['peak_anon_gb']:>6.2f} {r['peak_file_gb']:>6.2f} {r['ru_maxrss_gb']:>7.2f} "
            f"{r['end_rss_gb']:>6.2f} {r['used_rss_gb']:>6.2f} {r['load_s']:>7.1f} {r['share']:>6.2f} "
            f"{r['weights_match']!s:>5}"
        )
        if has_plan:
            line += (
                f" {r.get('plan_peak_gb', float('nan')):>8.2f} {r.get('plan_load_gb', float('nan')):>6.2f}"
            )
        lines.append(line)
    return "\n".join(lines)


class LoadingResult(TypedDict):
    """`bench()`'s record: benchmarks/results/loading.json."""

    model: str
    params: int
    model_bytes: int
    dtype: str
    shards: int
    largest_shard_bytes: int
    env: dict[str, Any]  # library versions, CPUs, the malloc threshold the ranks ran with
    rows: list[LoadingRow]
    ratio_vs_naive: dict[str, dict[str, list[float]]]  # world size -> method -> peak / naive's, per rank
    versions: dict[str, str | None]


def bench(
    json_out: str | Path,
    *,
    model: str = "medium",
    world_sizes=(1, 2),
    methods=METHODS,
    work_dir: str | Path | None = None,
    dtype: str = "bf16",
    max_shard_size: str = "200MB",
) -> LoadingResult:
    """Write the checkpoint (cached), run every method x world size, save JSON with the planner beside it."""
    import platform

    import deepspeed
    import torch
    import transformers

    work = Path(work_dir) if work_dir else Path.home() / ".cache" / "workshop" / "loading"

    work.mkdir(
        parents=True, exist_ok=True
    )  # judged before the checkpoint is written: minutes for a big model
    preflight_checkpoint(
        build_config(model), dtype, work, world_sizes, "naive" if "naive" in methods else methods[0]
    )
    ckpt = write_checkpoint(work / f"ckpt-{model}-{dtype}", model, dtype=dtype, max_shard_size=max_shard_size)
    info = verify_checkpoint(ckpt)
    shard = max((ckpt / s).stat().st_size for s in info.shards)
    rows = run_experiment(ckpt, methods=methods, world_sizes=world_sizes, out_dir=work / "runs")
    summary = summarize(rows, model=model, shard_bytes=shard)
    result: LoadingResult = {
        "model": model,
        "params": info.numel,
        "model_bytes": info.bytes,
        "dtype": dtype,
        "shards": len(info.shards),
        "largest_shard_bytes": shard,
        "env": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "deepspeed": deepspeed.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "malloc_mmap_threshold": _worker_env(1, None).get("MALLOC_MMAP_THRESHOLD_"),
        },
        "rows": summary,
        "ratio_vs_naive": {str(n): ratios(summary, world_size=n) for n in world_sizes},
        "versions": versions(),
    }
    Path(json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(json_out).write_text(json.dumps(result, indent=1))
    return result
