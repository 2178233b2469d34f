"""The ceiling result's schema (benchmarks/results/ceiling.json) and the numbers it is summed up by: one run's
record, a lever over its rounds, its verdict against its base, and the targets."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from workshop.experiments.measure import (
    Stats,
    StatsRecord,
    mfu,
    paired_ratios,
)
from workshop.lang import _
from workshop.plan.models import Architecture, flops_per_token
from workshop.report.verdict import lever_verdict, share, steady, verdict_word
from workshop.train import TrainArgs

TARGET_PCT_OF_CEILING = 60.0


class Bf16Probe(TypedDict):
    """bf16 against fp32 at one shape, measured where the recipe trains in fp32 (is bf16 emulated here?)."""

    shape: str
    fp32_tflops: float
    bf16_tflops: float
    bf16_over_fp32: float


class CeilingRound(TypedDict):
    """One round's GEMM ceiling at one (tokens, dtype): the mean of the probes before and after its levers."""

    round: int
    tflops: float
    start: dict[str, Any]  # gemm_ceiling()'s result
    end: dict[str, Any]
    drift_pct: float  # end against start: a neighbour's load shows here


class LeverRun(TypedDict):
    """`record()`: one training run of one lever."""

    tokens_per_s: float
    step_time_s: float
    flops_per_token: float
    model_tflops: float
    final_loss: float | None
    steps: int
    step_tokens_per_s: NotRequired[list[float]]  # every step's, the warm-up left out: the run's own spread


class LeverSummary(TypedDict):
    """`summarize_lever()`: a measured lever over its rounds."""

    runs: list[LeverRun]
    precision: str
    tokens_per_s: StatsRecord
    model_tflops: StatsRecord
    ceiling_tflops: StatsRecord
    pct_of_ceiling: StatsRecord  # of the same round's ceiling
    mfu_pct_of_peak: StatsRecord | None  # None: no nominal peak for this precision
    mfu_pct_of_amx_peak: StatsRecord | None
    effect_vs_base: NotRequired[StatsRecord]  # tokens/s over its base's, paired by round
    verdict: NotRequired[str]  # "pays" | "costs" | "within noise" | ONE_ROUND
    verdict_sentence: NotRequired[str]  # report.verdict.compare's sentence: the numbers behind the verdict
    verdict_range: NotRequired[tuple[float, float]]  # the ratio's range the verdict judged (lever / base)
    share: NotRequired[ShareRecord]  # the step's share of the ceiling from every step and probe


class ShareRecord(TypedDict):
    """report.verdict.share of a lever's steps against its ceiling probes (start and end of every round)."""

    pct: float
    low: float
    high: float
    drift_pct: float  # the ceiling's last probe against its first
    clear: bool  # one share can be quoted (the ceiling held within verdict.DRIFT_BOUND_PCT, share <= 100%)
    sentence: str


class LeverResult(TypedDict):
    """One lever in ceiling.json "levers": skipped or failed with a reason, or measured with its numbers."""

    label: str
    about: str
    base: str | None
    status: str  # "measured" | "skipped" | "failed"
    reason: NotRequired[str]  # skipped or failed
    train_args: NotRequired[list[str]]  # measured: the LeverSummary keys too
    env: NotRequired[dict[str, str]]
    allocator: NotRequired[str | None]
    runs: NotRequired[list[LeverRun]]
    precision: NotRequired[str]
    tokens_per_s: NotRequired[StatsRecord]
    model_tflops: NotRequired[StatsRecord]
    ceiling_tflops: NotRequired[StatsRecord]
    pct_of_ceiling: NotRequired[StatsRecord]
    mfu_pct_of_peak: NotRequired[StatsRecord | None]
    mfu_pct_of_amx_peak: NotRequired[StatsRecord | None]
    effect_vs_base: NotRequired[StatsRecord]
    verdict: NotRequired[str]
    verdict_sentence: NotRequired[str]
    verdict_range: NotRequired[tuple[float, float]]
    share: NotRequired[ShareRecord]


class StepTarget(TypedDict):
    target: float
    recipe: float | None  # the recipe's median % of the ceiling
    best_lever: str | None
    best: float | None
    verdict: str


class RatioTarget(TypedDict):
    target: float
    value: float | None
    verdict: str


class Targets(TypedDict):
    step_pct_of_ceiling: StepTarget
    bf16_over_fp32: RatioTarget


class CeilingResult(TypedDict):
    """`run()`'s record: benchmarks/results/ceiling.json (chapter 04 prints it; `save` adds when)."""

    benchmark: str
    device: str
    config: dict[str, Any]  # CeilingConfig's fields
    machine: dict[str, Any]  # machine()
    isa_path: str
    precision: str  # the recipe's, on this machine
    peaks: dict[str, Any]  # device_peaks()
    arch: dict[str, Any]  # Architecture's fields
    recipe: dict[str, Any]  # TrainArgs' fields
    shapes: list[dict[str, Any]]  # Linear's fields
    bf16_probe: Bf16Probe | None
    order: list[str]  # what ran, in order
    ceilings: dict[str, list[CeilingRound]]  # "<tokens>x<dtype>" -> per round
    levers: dict[str, LeverResult]
    wall_s: float
    targets: NotRequired[Targets]  # judged from the rest, added last


def record(m: dict, args: TrainArgs, arch: Architecture) -> LeverRun:
    """One run: useful tokens/s, step time (s) and the model TFLOP/s (6N + attention: flops_per_token)."""
    fpt = flops_per_token(
        m.get("params") or arch.params,
        layers=arch.layers,
        hidden=arch.hidden,
        seq_len=args.seq_len,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
    )
    tps = m["tokens_per_s_median"]
    per_step = steady([s.get("tokens_per_s") for s in m.get("steps", [])])
    return {
        "tokens_per_s": tps,
        "step_time_s": m["step_time_s_median"],
        "flops_per_token": fpt,
        "model_tflops": tps * fpt / 1e12,
        "final_loss": m.get("final_loss"),
        "steps": len(m.get("steps", [])),
        "step_tokens_per_s": per_step or [tps],
    }


def summarize_lever(
    recs: list[LeverRun],
    ceils: list[CeilingRound],
    peaks: dict,
    dtype: str,
    base: list[LeverRun] | None,
    labels: tuple[str, str] = ("lever", "base"),
) -> LeverSummary:
    """Medians and spreads over the rounds; % of the SAME round's ceiling; effect paired with the base's
    run."""
    peak = peaks.get(f"{dtype}_tflops")
    out: LeverSummary = {
        "runs": recs,
        "precision": dtype,
        "tokens_per_s": Stats.of([r["tokens_per_s"] for r in recs]).as_dict(),
        "model_tflops": Stats.of([r["model_tflops"] for r in recs]).as_dict(),
        "ceiling_tflops": Stats.of([c["tflops"] for c in ceils]).as_dict(),
        "pct_of_ceiling": Stats.of(
            [100 * r["model_tflops"] / c["tflops"] for r, c in zip(recs, ceils)]
        ).as_dict(),
        "mfu_pct_of_peak": Stats.of(
            [mfu(r["tokens_per_s"], r["flops_per_token"], peak) for r in recs]
        ).as_dict()
        if peak
        else None,
        "mfu_pct_of_amx_peak": Stats.of(
            [mfu(r["tokens_per_s"], r["flops_per_token"], peaks["amx_bf16_tflops"]) for r in recs]
        ).as_dict()
        if peaks.get("amx_bf16_tflops")
        else None,
    }
    probes = [p["tflops"] for c in ceils for p in (c["start"], c["end"])]
    if probes:
        steps = [t * r["flops_per_token"] / 1e12 for r in recs for t in r.get("step_tokens_per_s", [])]
        sh = share(
            steps or [r["model_tflops"] for r in recs],
            probes,
            part_label=_("the step"),
            reference_label=_("GEMM ceiling"),
            unit="TFLOPS",
        )
        out["share"] = {
            "pct": sh.pct,
            "low": sh.low,
            "high": sh.high,
            "drift_pct": sh.drift_pct,
            "clear": sh.clear,
            "sentence": sh.sentence,
        }
    if base is not None:
        eff = paired_ratios([r["tokens_per_s"] for r in recs], [r["tokens_per_s"] for r in base])
        out["effect_vs_base"] = eff.as_dict()
        v = lever_verdict(recs, base, labels)
        out["verdict"] = verdict_word(v, labels[0], len(recs))
        out["verdict_sentence"] = v.sentence
        out["verdict_range"] = (v.low, v.high)
    return out


def targets(res: CeilingResult) -> Targets:
    """The issue's targets, judged where they can be: step >= 60% of the ceiling; bf16 >= 2x fp32 with native
    bf16."""
    lv = res["levers"]
    measured = {n: v for n, v in lv.items() if v["status"] == "measured"}
    # only levers in the recipe's precision compete: fp32 on an AMX CPU fills more of fp32's (six times lower)
    # ceiling while running at half the speed, which is no step closer to this machine's ceiling
    same = {n: v for n, v in measured.items() if v.get("precision", res["precision"]) == res["precision"]}
    best = max(same, key=lambda n: same[n]["pct_of_ceiling"]["median"]) if same else None
    v = measured[best]["pct_of_ceiling"]["median"] if best else None
    recipe = measured["recipe"]["pct_of_ceiling"]["median"] if "recipe" in measured else None
    step: StepTarget = {
        "target": TARGET_PCT_OF_CEILING,
        "recipe": recipe,
        "best_lever": best,
        "best": v,
        "verdict": (
            "not measured"
            if v is None
            else "met"
            if v >= TARGET_PCT_OF_CEILING
            else f"missed by {100 * (TARGET_PCT_OF_CEILING - v) / TARGET_PCT_OF_CEILING:.0f}%"
        ),
    }
    ratio: RatioTarget
    if "bf16" in measured:
        r = measured["bf16"]["effect_vs_base"]["median"]
        ratio = {"target": 2.0, "value": r, "verdict": "met" if r >= 2 else "missed"}
    elif "fp32" in measured:
        r = 1 / measured["fp32"]["effect_vs_base"]["median"]
        ratio = {"target": 2.0, "value": r, "verdict": "met" if r >= 2 else "missed"}
    else:
        why = lv["bf16"].get("reason") if "bf16" in lv else None
        why = why or "bf16 lever not run"
        ratio = {"target": 2.0, "value": None, "verdict": f"cannot be judged here: {why}"}
    return {"step_pct_of_ceiling": step, "bf16_over_fp32": ratio}
