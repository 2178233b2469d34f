"""`workshop bench`: side-by-side benchmarks that prove (or refute) that the workbook's CPU recipe is the fast
one.

A 2-core VM drifts by about +-10% between batches, so a single A-then-B comparison can show a 10% win that is
only drift. Every comparison here runs its variants interleaved (A B A B ...), keeps every run, and reports
medians, the spread, and the ratio of each A/B pair run back to back. Results go to
benchmarks/results/<name>.json, and `summary_rows()` turns them into the table chapter 04 shows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from workshop.errors import (
    WorkshopError,
    check_choice,
    check_output,
    check_positive,
    read_json,
    read_text,
    report,
)
from workshop.experiments.ceiling import main as ceiling_main
from workshop.experiments.measure import (
    PeaksSummary,
    Stats,
    StatsRecord,
    flops_per_token,
    interleave,
    mfu,
    paired_ratios,
    peaks_for,
    save,
)
from workshop.experiments.recipes import ORIGINAL_MIN_CHARS, VARIANTS, Variant, run_argv, runnable_here
from workshop.launch.notebooks import run_workbook
from workshop.launch.torchrun import allocator_env, run_torchrun
from workshop.paths import IMAGES_DIR, RESULTS_DIR
from workshop.plan.gemm import GemmCell, GemmSummary, gemm_benchmark, summarize
from workshop.plan.hardware import detect
from workshop.plan.models import PRESETS, Architecture, architecture
from workshop.report.interpret import measured_on
from workshop.report.plots import plot_bench_recipes
from workshop.report.verdict import compare as compare_samples
from workshop.train.data import build_corpus, local_kit

# ---------------------------------------------------------------- statistics


# ---------------------------------------------------------------- FLOPs and MFU


# ---------------------------------------------------------------- the corpus


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


# ---------------------------------------------------------------- the variants


# Which variants each training benchmark compares: (A, B); ratios are A / B.
TRAINING_BENCHMARKS: dict[str, tuple[str, str]] = {
    "recipes": ("workbook", "original"),
    "engine": ("workbook", "original_engine_packed"),
    "precision": ("workbook", "workbook_fp32"),
}
BENCHMARKS = (*TRAINING_BENCHMARKS, "gemm", "ipex", "workbook")
# Run on its own (its options differ): `workshop bench ceiling ...` is workshop.experiments.ceiling.main.
OWN_COMMAND = ("ceiling",)


@dataclass
class BenchConfig:
    """What every variant shares: same model, data file, step count and rank count."""

    model: str = "small"
    dataset: str | None = None  # a text file, one sample a line; None = the local paragraph corpus
    steps: int = 8
    rounds: int = 2
    nproc: int = 2
    seq_len: int = 512
    cache_dir: str = "~/.cache/workshop"
    out_dir: str = "out/bench"
    results_dir: str = str(RESULTS_DIR)
    images_dir: str = str(IMAGES_DIR)
    timeout_s: float = 1800

    def validate(self) -> None:
        for name in ("steps", "rounds", "nproc", "seq_len"):
            check_positive(name, getattr(self, name))
        if self.steps < 3:
            raise WorkshopError(
                f"steps must be >= 3 (the first, warm-up step is left out of medians), got {self.steps}"
            )
        if self.dataset is not None:  # its head: a folder, an empty or a binary file fail here
            read_text(self.dataset, "--dataset", "a UTF-8 text file, one sample per line", limit=1 << 16)

    def dataset_path(self) -> Path:
        if self.dataset:
            return Path(self.dataset)

        return build_corpus(Path(self.cache_dir).expanduser() / "corpus.txt")


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
        v = VARIANTS[vname]
        recs = runs[vname]
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
        variants[vname] = {
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
    return out


def paired_verdict(res: Mapping[str, Any], runs: Mapping[str, list] | None = None) -> str:
    """A against B through report.verdict.compare, paired by round: a winner only when every round agrees and
    the effect is beyond the noise floor (stored results without it get it computed from their runs)."""
    a, b = res["a"], res["b"]
    got = runs or {n: res["variants"][n]["runs"] for n in (a, b)}
    return compare_samples(
        [r["tokens_per_s"] for r in got[a]],
        [r["tokens_per_s"] for r in got[b]],
        a_label=VARIANTS[a].label,
        b_label=VARIANTS[b].label,
        paired=True,
        where=measured_on(res) if runs is None else None,
    ).sentence


# ---------------------------------------------------------------- targets

TARGETS = {
    "recipes": ("useful tokens/s, workbook / original workshop's recipe", 20.0),
    "engine": (
        "useful tokens/s on the same packed blocks, workbook engine / original workshop's engine",
        2.0,
    ),
    "mfu": ("model FLOPs utilization of the workbook recipe, % of AMX bf16 peak", 10.0),
    "precision": ("step throughput, bf16 / fp32 (workbook recipe)", 2.0),
    "gemm": ("best bf16 GEMM, % of AMX bf16 peak", 40.0),
    "workbook": ("whole-workbook smoke run, minutes (at most)", 10.0),
    "ceiling": (
        "training step model FLOP/s, % of the same cores' GEMM rate at the model's shapes (best lever)",
        60.0,
    ),
}


def _verdict(value: float | None, target: float, *, at_most: bool = False, judged: bool = True) -> str:
    if value is None:
        return "not measured"
    if not judged:
        return "cannot be judged here (no AMX)"
    ok = value <= target if at_most else value >= target
    return "met" if ok else f"missed by {abs(value - target) / target * 100:.0f}%"


def load_results(results_dir: str | Path = RESULTS_DIR) -> dict[str, dict]:
    """Every benchmark JSON in the folder, by benchmark name (missing ones are simply absent)."""
    out = {}
    for name in (*BENCHMARKS, *OWN_COMMAND):
        path = Path(results_dir) / f"{name}.json"
        if path.exists():
            out[name] = read_json(path, "benchmark result", "a JSON object written by `workshop bench`")
    return out


class SummaryRow(TypedDict):
    """One row of the headline table (`summary_rows()`, chapter 04 and benchmarks/README.md)."""

    benchmark: str
    metric: str
    value: float | None  # None: not measured
    unit: str
    target: float | None
    measured_on: NotRequired[str]  # interpret.measured_on() of the result
    verdict: str | None
    detail: str


def summary_rows(
    results: Mapping[str, Mapping[str, Any]] | None = None, results_dir: str | Path = RESULTS_DIR
) -> list[SummaryRow]:
    """The headline table: one row per target with the measured value, the target and a plain verdict."""
    res = load_results(results_dir) if results is None else results
    amx = any(r.get("peaks", {}).get("amx") for r in res.values() if isinstance(r, dict))
    rows: list[SummaryRow] = []

    def row(key, value, unit, *, judged=True, at_most=False, detail=""):
        what, target = TARGETS[key]
        rows.append(
            {
                "benchmark": key,
                "metric": what,
                "value": None if value is None else round(value, 2),
                "unit": unit,
                "target": target,
                "measured_on": measured_on(res.get(key) or rec_any),
                "verdict": _verdict(value, target, at_most=at_most, judged=judged),
                "detail": detail,
            }
        )

    rec_any = next((res[k] for k in ("recipes", "engine", "precision") if res.get(k)), {})

    for key in ("recipes", "engine", "precision"):
        r = res.get(key)
        if r:
            ratio = r["tokens_per_s_ratio"]
            va, vb = r["variants"][r["a"]], r["variants"][r["b"]]
            row(
                key,
                ratio["median"],
                "x",
                detail=f"{va['tokens_per_s']['median']:.0f} vs {vb['tokens_per_s']['median']:.0f}"
                f" tokens/s; paired ratios {ratio['min']:.2f}-{ratio['max']:.2f} over {ratio['n']} rounds; "
                + (r.get("verdict") or paired_verdict(r)),
            )
        else:
            row(key, None, "x")
    rec = res.get("recipes") or res.get("engine")
    if rec:
        w = rec["variants"][rec["a"]]
        row(
            "mfu",
            w["mfu_pct_of_amx_peak"],
            "%",
            judged=amx,
            detail=f"{w['model_tflops']:.3f} model TFLOPS = {w['mfu_pct_of_present_peak']}% of that CPU's "
            f"{rec['peaks']['bf16_path']} peak ({rec['peaks']['bf16_tflops']:.2f} TFLOPS), "
            f"{w['mfu_pct_of_amx_peak']}% of {rec['peaks']['cores']}-core AMX peak "
            f"({rec['peaks']['amx_bf16_tflops']:.2f} TFLOPS)",
        )
    else:
        row("mfu", None, "%")
    g = res.get("gemm")
    if g:
        row(
            "gemm",
            g["bf16_pct_of_amx_peak"],
            "%",
            judged=g["amx"],
            detail=f"bf16 {g['bf16_tflops']:.3f} TFLOPS at n={g['bf16_size']} = {g['bf16_pct_of_peak']}% of "
            "that "
            f"CPU's {g['peak_bf16_path']} peak; bf16/fp32 GEMM x{g['bf16_over_fp32']}",
        )
    else:
        row("gemm", None, "%")
    wb = res.get("workbook")
    row(
        "workbook",
        wb["total_s"] / 60 if wb else None,
        "min",
        at_most=True,
        detail=f"{len(wb['notebooks'])} notebooks: {', '.join(n['notebook'] for n in wb['notebooks'])}"
        if wb
        else "",
    )
    c = res.get("ceiling")
    if c:
        t = c["targets"]["step_pct_of_ceiling"]
        row(
            "ceiling",
            t["best"],
            "%",
            detail=f"{c['isa_path']}; recipe {t['recipe']:.1f}%, best lever "
            f"{t['best_lever']}; {c['config']['model']}, {c['config']['nproc']} ranks x "
            f"{c['config']['threads']} threads",
        )
    ip = res.get("ipex")
    if ip:
        rows.append(
            {
                "benchmark": "ipex",
                "metric": "IPEX / stock PyTorch, training step throughput",
                "value": round(ip["ratio"]["median"], 2) if ip.get("status") == "ok" else None,
                "unit": "x",
                "target": None,
                "verdict": ip.get("status"),
                "detail": ip.get("message", ""),
            }
        )
    return rows


def format_rows(rows: list[SummaryRow], *, targets: bool = False) -> str:
    """The stored benchmarks as a markdown table, each row with the machine it was measured on.

    Learners see measurements and where they were taken; `targets=True` adds the project's goals and
    verdicts (for benchmarks/README.md and the maintainers)."""
    head = "| benchmark | metric | measured | detail | measured on |"
    if targets:
        head += " target | verdict |"
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        value = "-" if r["value"] is None else f"{r['value']} {r['unit']}"
        line = f"| {r['benchmark']} | {r['metric']} | {value} | {r['detail']} | {r.get('measured_on', '-')} |"
        if targets:
            target = (
                "-"
                if r["target"] is None
                else f"{'<=' if r['benchmark'] == 'workbook' else '>='} {r['target']} {r['unit']}"
            )
            line += f" {target} | {r['verdict']} |"
        lines.append(line)
    return "\n".join(lines)


# ---------------------------------------------------------------- the benchmarks


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


IPEX_SCRIPT = Path(__file__).with_name("bench_ipex_child.py")


def ipex_python() -> str | None:
    """The interpreter of the separate IPEX environment (environment-ipex.yml), if there is one."""
    explicit = os.environ.get("WORKSHOP_IPEX_PYTHON")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for root in ("~/miniforge3", "~/miniconda3", "~/anaconda3", "/opt/conda"):
        cand = Path(root).expanduser() / "envs" / "workshop-ipex" / "bin" / "python"
        if cand.exists():
            return str(cand)
    return None


def ipex(cfg: BenchConfig, python: str | None = None, *, stock_only: bool = False) -> dict:
    """IPEX vs stock PyTorch on the same model and batches, run in IPEX's own pinned environment.

    IPEX 2.8.0 needs torch 2.8.* (and its LLM path transformers <= 4.56), so it cannot share this environment;
    the child gets the model shape and pre-tokenized blocks as JSON (a transformers-5 tokenizer does not load
    in transformers 4.x).
    """
    python = python or ipex_python()
    if python is None:
        return {
            "benchmark": "ipex",
            "status": "skipped",
            "message": "no IPEX environment found: create it with `conda env create -f environment-ipex.yml` "
            "(IPEX 2.8.0 pins torch 2.8.*, transformers 4.51.3), or point WORKSHOP_IPEX_PYTHON at its "
            "python. The workbook's default path never needs IPEX (retired; stock PyTorch reaches "
            "AMX through oneDNN).",
        }

    _, tok = local_kit(Path(cfg.cache_dir).expanduser())
    ids: list[int] = []
    for line in cfg.dataset_path().read_text(encoding="utf-8").splitlines():
        if line.strip():
            ids += tok(line)["input_ids"] + [tok.eos_token_id]
        if len(ids) > cfg.seq_len * 64:
            break
    blocks = [ids[i : i + cfg.seq_len] for i in range(0, len(ids) - cfg.seq_len + 1, cfg.seq_len)]
    spec = {
        "config": PRESETS[cfg.model].config,
        "blocks": blocks,
        "micro_batch": 2,
        "steps": cfg.steps,
        "rounds": cfg.rounds,
        "threads": os.cpu_count() or 1,
        "stock_only": stock_only,
    }
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    spec_path = Path(cfg.out_dir) / "ipex_spec.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [python, str(IPEX_SCRIPT), str(spec_path)],
        capture_output=True,
        text=True,
        timeout=cfg.timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        return {
            "benchmark": "ipex",
            "status": "failed",
            "python": python,
            "message": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no output",
            "stderr_tail": proc.stderr[-3000:],
        }
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    ratio = paired_ratios(child["ipex_tokens_per_s"], child["stock_tokens_per_s"])
    return {
        "benchmark": "ipex",
        "status": "ok",
        "python": python,
        **child,
        "ratio": asdict(ratio),
        "message": f"IPEX / stock = x{ratio.median:.2f} (paired over {ratio.n} rounds)",
    }


class NotebookTiming(TypedDict):
    notebook: str
    status: str
    seconds: float


class WorkbookSmoke(TypedDict):
    """`workbook_smoke()`'s record: benchmarks/results/workbook.json."""

    benchmark: str
    total_s: float
    minutes: float
    all_ok: bool
    notebooks: list[NotebookTiming]


def workbook_smoke(out: str | Path = "out/bench-workbook", echo=print) -> WorkbookSmoke:
    """Every notebook with its small defaults (papermill), timed: the smoke run CI does."""

    t0 = time.time()
    runs = run_workbook(out, echo=echo)
    total = time.time() - t0
    return {
        "benchmark": "workbook",
        "total_s": round(total, 1),
        "minutes": round(total / 60, 2),
        "all_ok": all(r.status == "ok" for r in runs),
        "notebooks": [{"notebook": r.notebook, "status": r.status, "seconds": r.seconds} for r in runs],
    }


def plot(results: Mapping[str, Mapping[str, Any]], images_dir: str | Path) -> list[Path]:

    bars: list[dict[str, Any]] = []  # variant, label and its tokens/s Stats
    for key in ("recipes", "engine", "precision"):
        r = results.get(key)
        if not r:
            continue
        for vname in (r["b"], r["a"]):
            v = r["variants"][vname]
            if not any(b["variant"] == vname for b in bars):
                bars.append({"variant": vname, "label": v["label"], **v["tokens_per_s"]})
    rec = next((results[k] for k in ("recipes", "engine", "precision") if results.get(k)), None)
    return (
        [plot_bench_recipes(bars, Path(images_dir) / "bench_recipes.png", machine=measured_on(rec))]
        if bars
        else []
    )


def _check_paths(a, cfg: BenchConfig) -> None:
    """The folders and files a run writes, and the stored results the summary reads, judged before any
    benchmark runs: a wrong path or a damaged result file must not cost a benchmark's minutes."""
    if a.benchmark == ["summary"] and not Path(cfg.results_dir).is_dir():
        raise WorkshopError(
            f"--results-dir {cfg.results_dir!r}: no such folder; expected the benchmarks' JSON results"
        )
    for flag, path in (
        ("--results-dir", cfg.results_dir),
        ("--images-dir", cfg.images_dir),
        ("--out-dir", cfg.out_dir),
    ):
        check_output(path, flag, folder=True)
    if a.json_out:
        check_output(a.json_out, "--json-out")
    if a.ipex_python and not (Path(a.ipex_python).is_file() and os.access(a.ipex_python, os.X_OK)):
        raise WorkshopError(
            f"--ipex-python {a.ipex_python!r} is not an executable file; expected the python of "
            "the IPEX environment (environment-ipex.yml)"
        )
    load_results(cfg.results_dir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="workshop bench", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "benchmark",
        nargs="+",
        help=f"{' | '.join(BENCHMARKS)} | all | summary (several: their "
        "training variants are interleaved in ONE series of rounds)",
    )
    p.add_argument(
        "--dataset", default=None, help="text file, one sample per line (default: the paragraph corpus)"
    )
    p.add_argument("--model", default="small")
    p.add_argument(
        "--steps", type=int, default=BenchConfig.steps, help="optimizer steps per run (same for all)"
    )
    p.add_argument("--rounds", type=int, default=BenchConfig.rounds, help="interleaved A B rounds")
    p.add_argument("--nproc", type=int, default=BenchConfig.nproc, help="ranks per run")
    p.add_argument("--cache-dir", default=BenchConfig.cache_dir)
    p.add_argument("--out-dir", default=BenchConfig.out_dir, help="where each run's logs and metrics go")
    p.add_argument("--results-dir", default=str(RESULTS_DIR))
    p.add_argument("--images-dir", default=str(IMAGES_DIR))
    p.add_argument("--json-out", default=None, help="write this benchmark's JSON here instead of results-dir")
    p.add_argument(
        "--ipex-python", default=None, help="python of the IPEX environment (default: auto-detect)"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["ceiling"]:
        return ceiling_main(argv[1:])
    a = p.parse_args(argv)
    try:
        if "ceiling" in a.benchmark:
            raise WorkshopError(
                "run `python -m workshop bench ceiling` on its own: its options differ "
                "(see `python -m workshop bench ceiling --help`)"
            )
        for b in a.benchmark:
            check_choice("benchmark", b, (*BENCHMARKS, "all", "summary"))
        cfg = BenchConfig(
            model=a.model,
            dataset=a.dataset,
            steps=a.steps,
            rounds=a.rounds,
            nproc=a.nproc,
            cache_dir=a.cache_dir,
            out_dir=a.out_dir,
            results_dir=a.results_dir,
            images_dir=a.images_dir,
        )
        cfg.validate()
        _check_paths(a, cfg)
        if "all" in a.benchmark:
            names = list(BENCHMARKS)
        else:
            names = [b for b in dict.fromkeys(a.benchmark) if b != "summary"]
        if a.json_out and len(names) != 1:
            raise WorkshopError(f"--json-out names one benchmark's file, got {names}; use --results-dir")
        done: dict[str, Mapping[str, Any]] = {}
        training = [n for n in names if n in TRAINING_BENCHMARKS]
        if training:
            done.update(training_benchmarks(training, cfg))
        if "gemm" in names:
            done["gemm"] = gemm()
        if "ipex" in names:
            done["ipex"] = ipex(cfg, a.ipex_python)
        if "workbook" in names:
            done["workbook"] = workbook_smoke(Path(cfg.out_dir) / "workbook")
        for name, result in done.items():
            print(f"wrote {save(name, result, cfg.results_dir, a.json_out)}")
        if done:
            for path in plot({**load_results(cfg.results_dir), **done}, cfg.images_dir):
                print(f"figure {path}")
    except WorkshopError as e:
        return report(e)
    print(format_rows(summary_rows({**load_results(cfg.results_dir), **done})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
