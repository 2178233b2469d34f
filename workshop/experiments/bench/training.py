"""The training benchmarks (recipes, engine, precision): variants run interleaved, A against B.

A 2-core VM drifts by about +-10% between batches, so a single A-then-B comparison can show a 10% win that is
only drift. Every comparison here runs its variants interleaved (A B A B ...), keeps every run, and reports
medians, the spread, and the ratio of each A/B pair run back to back."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from workshop.errors import (
    WorkshopError,
)
from workshop.experiments.bench.config import TRAINING_BENCHMARKS, BenchConfig
from workshop.experiments.measure import (
    PeaksSummary,
    Stats,
    StatsRecord,
    interleave,
    mfu,
    paired_ratios,
    peaks_for,
)
from workshop.experiments.recipes import ORIGINAL_MIN_CHARS, VARIANTS, Variant, run_argv, runnable_here
from workshop.lang import _
from workshop.launch.allocator import allocator_env
from workshop.launch.torchrun import run_torchrun
from workshop.plan.models import PRESETS, Architecture, architecture, flops_per_token
from workshop.report.interpret import measured_on
from workshop.report.verdict import compare as compare_samples
from workshop.train.data import local_kit


class CorpusStats(TypedDict):
    """`corpus_stats()`: what padding costs on the corpus (the training benchmarks' "corpus")."""

    path: str
    lines: int
    kept_lines: int
    mean_chars_per_line: float
    mean_tokens_per_line: float
    max_length: int
    padding_efficiency: float  # useful tokens / padded tokens
    total_tokens: int
    packed_blocks: int


def corpus_stats(
    path: str | Path, tokenizer, *, min_chars: int = ORIGINAL_MIN_CHARS, max_length: int = 512
) -> CorpusStats:
    """What padding costs on this corpus: mean useful tokens per line against the padded length.

    Counted like the original workshop: lines of fewer than min_chars characters dropped, each kept line
    truncated at max_length. Tokens per line / max_length is the share of the padded recipe's compute that is
    useful.
    """
    lines = [x for x in Path(path).read_text(encoding="utf-8").splitlines()]
    kept = [x for x in lines if len(x.strip()) >= min_chars]
    if not kept:
        raise WorkshopError(f"no line of {path} has >= {min_chars} characters")
    lengths = [min(len(ids), max_length) for ids in tokenizer(kept)["input_ids"]]
    mean_tokens = statistics.fmean(lengths)
    return {
        "path": str(path),
        "lines": len(lines),
        "kept_lines": len(kept),
        "mean_chars_per_line": round(statistics.fmean(len(x) for x in kept), 1),
        "mean_tokens_per_line": round(mean_tokens, 1),
        "max_length": max_length,
        "padding_efficiency": round(mean_tokens / max_length, 4),
        "total_tokens": sum(lengths),
        "packed_blocks": sum(lengths) // max_length,
    }


def variant_argv(v: Variant, cfg: BenchConfig, run_dir: Path) -> list[str]:
    """The entry point's arguments for one variant, as this host runs them (runnable_here)."""
    head = run_argv(
        model=cfg.model,
        dataset=str(cfg.dataset_path()),
        seq_len=cfg.seq_len,
        steps=cfg.steps,
        cache_dir=cfg.cache_dir,
        output_dir=str(run_dir),
    )
    return [*head, *runnable_here(v.argv)]


class RunRecord(TypedDict):
    """`run_record()`: one run of one variant, as the training benchmarks' JSON keeps it under "runs"."""

    variant: str
    round: int
    steps: int
    wall_s: float
    tokens_per_s: float  # useful (padding left out), median over steps
    step_time_s: float
    useful_tokens_per_step: float
    computed_tokens_per_s: float | None  # padding included
    params: int | None
    first_loss: float | None
    final_loss: float | None
    peak_rss_gb_per_rank: list[float] | None


class VariantRun(RunRecord):
    allocator: str  # what the ranks allocated through


def run_variant(v: Variant, cfg: BenchConfig, round_: int) -> VariantRun:
    """One torchrun of the entry point; the record keeps the per-step medians and the whole-run numbers."""

    run_dir = Path(cfg.out_dir) / f"{v.name}-r{round_}"
    env, allocator = allocator_env(v.allocator)
    res = run_torchrun(
        variant_argv(v, cfg, run_dir),
        nproc_per_node=cfg.nproc,
        threads_per_rank=v.threads_per_rank,
        env=env,
        progress=False,
        timeout=cfg.timeout_s,
    ).check()
    return {**run_record(v, round_, res.finished_metrics(), res.seconds), "allocator": allocator}


def run_record(v: Variant, round_: int, m: dict, wall_s: float) -> RunRecord:
    steady = m["steps"][1:] or m["steps"]
    args = m.get("args", {})
    samples_per_step = args.get("micro_batch", 1) * args.get("grad_accum", 1) * m.get("world_size", 1)
    step_s = m["step_time_s_median"]
    return {
        "variant": v.name,
        "round": round_,
        "steps": len(m["steps"]),
        "wall_s": wall_s,
        "tokens_per_s": m["tokens_per_s_median"],
        "step_time_s": step_s,
        "useful_tokens_per_step": statistics.median(s["tokens"] for s in steady),
        "computed_tokens_per_s": samples_per_step * args.get("seq_len", 0) / step_s if step_s else None,
        "params": m.get("params"),
        "first_loss": m.get("first_loss"),
        "final_loss": m.get("final_loss"),
        "peak_rss_gb_per_rank": m.get("peak_rss_gb_per_rank"),
    }


def run_interleaved(
    names: Sequence[str],
    cfg: BenchConfig,
    runner: Callable[[Variant, BenchConfig, int], RunRecord] = run_variant,
    echo=print,
) -> dict[str, list[RunRecord]]:
    """Run every variant once per round, in the interleaved order; records grouped by variant, in round
    order."""
    order = interleave(names, cfg.rounds)
    runs: dict[str, list[RunRecord]] = {n: [] for n in names}
    for i, (r, name) in enumerate(order):
        echo(f"[{i + 1}/{len(order)}] round {r + 1}: {name} ...")
        rec = runner(VARIANTS[name], cfg, r)
        runs[name].append(rec)
        echo(f"    {rec['tokens_per_s']:.0f} useful tokens/s, {rec['step_time_s']:.2f} s/step")
    return runs


class VariantSummary(TypedDict):
    """One variant of a training benchmark over its rounds."""

    label: str
    about: str
    threads_per_rank: int
    precision: str
    argv: list[str]
    runs: list[RunRecord]
    tokens_per_s: StatsRecord
    step_time_s: StatsRecord
    computed_tokens_per_s: float
    flops_per_token: float
    model_tflops: float
    mfu_pct_of_present_peak: float | None  # % of this CPU's peak in the variant's precision (None: not known)
    mfu_pct_of_amx_peak: float
    hfu_pct_of_present_peak: float | None  # computed (padded) tokens instead of useful ones


class TrainingBenchmark(TypedDict):
    """`compare()`'s record: benchmarks/results/{recipes,engine,precision}.json, A against B."""

    benchmark: str
    a: str
    b: str
    config: dict[str, Any]  # BenchConfig's fields
    peaks: PeaksSummary
    arch: dict[str, Any]  # Architecture's fields
    corpus: CorpusStats | None
    variants: dict[str, VariantSummary]
    order: list[str]  # "variant#round" in the order they ran
    tokens_per_s_ratio: StatsRecord  # A / B, paired by round
    step_time_ratio_b_over_a: StatsRecord
    verdict: NotRequired[str]  # report.verdict.compare of A against B, paired by round
    interleaved_with: NotRequired[list[str]]  # training_benchmarks(): every variant of the series
    wall_s_all_variants: NotRequired[float]


def compare(
    name: str,
    runs: dict[str, list[RunRecord]],
    cfg: BenchConfig,
    *,
    peaks: PeaksSummary,
    arch: Architecture,
    corpus: CorpusStats | None = None,
) -> TrainingBenchmark:
    """One training benchmark's JSON: per variant stats and MFU; A/B ratios per round; the target verdict."""
    a, b = TRAINING_BENCHMARKS[name]
    variants: dict[str, VariantSummary] = {}  # filled below, in place
    out: TrainingBenchmark = {
        "benchmark": name,
        "a": a,
        "b": b,
        "config": asdict(cfg),
        "peaks": peaks,
        "arch": asdict(arch),
        "corpus": corpus,
        "variants": variants,
        "order": [f"{r['variant']}#{r['round']}" for rr in zip(*(runs[a], runs[b])) for r in rr],
        # A / B per round, paired: a drift between rounds cancels in each ratio
        "tokens_per_s_ratio": paired_ratios(
            [r["tokens_per_s"] for r in runs[a]], [r["tokens_per_s"] for r in runs[b]]
        ).as_dict(),
        "step_time_ratio_b_over_a": paired_ratios(
            [r["step_time_s"] for r in runs[b]], [r["step_time_s"] for r in runs[a]]
        ).as_dict(),
    }
    out["verdict"] = paired_verdict(out, runs)
    for vname in (a, b):
        variants[vname] = variant_summary(vname, runs[vname], cfg, peaks=peaks, arch=arch)
    return out


def variant_summary(
    vname: str, recs: list[RunRecord], cfg: BenchConfig, *, peaks: PeaksSummary, arch: Architecture
) -> VariantSummary:
    """One variant over its rounds: tokens/s and step-time stats, model TFLOP/s, MFU and HFU (%)."""
    v = VARIANTS[vname]
    tps = Stats.of([r["tokens_per_s"] for r in recs])
    fpt = flops_per_token(
        recs[0]["params"] or arch.params,
        layers=arch.layers,
        hidden=arch.hidden,
        seq_len=cfg.seq_len,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
    )
    peak_here = peaks["bf16_tflops"] if v.precision == "bf16" else peaks["fp32_tflops"]
    computed = Stats.of([r["computed_tokens_per_s"] for r in recs])
    return {
        "label": v.label,
        "about": v.about,
        "threads_per_rank": v.threads_per_rank,
        "precision": v.precision,
        "argv": list(v.argv),
        "runs": recs,
        "tokens_per_s": tps.as_dict(),
        "step_time_s": Stats.of([r["step_time_s"] for r in recs]).as_dict(),
        "computed_tokens_per_s": computed.median,
        "flops_per_token": fpt,
        "model_tflops": tps.median * fpt / 1e12,
        "mfu_pct_of_present_peak": round(mfu(tps.median, fpt, peak_here), 2) if peak_here else None,
        "mfu_pct_of_amx_peak": round(mfu(tps.median, fpt, peaks["amx_bf16_tflops"]), 2),
        "hfu_pct_of_present_peak": round(mfu(computed.median, fpt, peak_here), 2) if peak_here else None,
    }


def paired_verdict(res: Mapping[str, Any], runs: Mapping[str, list] | None = None) -> str:
    """A against B through report.verdict.compare, paired by round: a winner only when every round agrees and
    the effect is beyond the noise floor (stored results without it get it computed from their runs)."""
    a, b = res["a"], res["b"]
    got = runs or {n: res["variants"][n]["runs"] for n in (a, b)}
    return compare_samples(
        [r["tokens_per_s"] for r in got[a]],
        [r["tokens_per_s"] for r in got[b]],
        a_label=_(VARIANTS[a].label),
        b_label=_(VARIANTS[b].label),
        paired=True,
        where=measured_on(res) if runs is None else None,
    ).sentence


def _arch(cfg: BenchConfig) -> Architecture:

    if cfg.model not in PRESETS:
        raise WorkshopError(
            f"benchmarks use a preset model; got {cfg.model!r}, allowed: {', '.join(PRESETS)}"
        )
    return architecture(cfg.model)


def _corpus(cfg: BenchConfig) -> CorpusStats:

    _, tok = local_kit(Path(cfg.cache_dir).expanduser())
    return corpus_stats(cfg.dataset_path(), tok, max_length=cfg.seq_len)


def training_benchmarks(
    names: Sequence[str], cfg: BenchConfig, runner=run_variant, echo=print
) -> dict[str, TrainingBenchmark]:
    """Run the union of the named benchmarks' variants interleaved ONCE, then split it per benchmark."""
    variants: list[str] = []
    for n in names:
        for v in TRAINING_BENCHMARKS[n]:
            if v not in variants:
                variants.append(v)
    arch, peaks, corpus = _arch(cfg), peaks_for(cfg.nproc), _corpus(cfg)
    echo(
        f"corpus: {corpus['kept_lines']} lines, {corpus['mean_tokens_per_line']} useful tokens per line "
        f"({100 * corpus['padding_efficiency']:.1f}% of a {cfg.seq_len}-token padded sample)"
    )
    t0 = time.time()
    runs = run_interleaved(variants, cfg, runner, echo)
    out = {}
    for n in names:
        res = compare(n, runs, cfg, peaks=peaks, arch=arch, corpus=corpus)
        res["interleaved_with"] = variants
        res["order"] = [f"{name}#{r}" for r, name in interleave(variants, cfg.rounds)]
        res["wall_s_all_variants"] = round(time.time() - t0, 1)
        out[n] = res
    return out
