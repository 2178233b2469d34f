"""Chapter 04's figures of a training run: loss and throughput per step, full fine-tuning beside LoRA, the
thread settings side by side, and `workshop bench slice`'s steps against the planner with its GEMM thread
curve. Saved as workshop.report.plots saves every figure (a `Figure`: a PNG's path that shows inline)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from workshop.lang import N_, _
from workshop.report.plots import _save


def plot_training(steps: list[dict], path, title: str = N_("ZeRO-3 training on CPU (gloo)")) -> Path:
    """Loss (training, and held-out where the run evaluated) and useful tokens/s per optimizer step, side by
    side -> the PNG's path."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = [s["step"] for s in steps]
    a.plot(xs, [s["loss"] for s in steps], marker="o", ms=3, label=_("training loss"))
    evals = [s for s in steps if s.get("eval_loss") is not None]
    if evals:
        a.plot(
            [s["step"] for s in evals],
            [s["eval_loss"] for s in evals],
            marker="s",
            color="tab:red",
            label=_("held-out loss"),
        )
        a.legend()
    a.set_xlabel(_("optimizer step"))
    a.set_ylabel(_("training loss") if not evals else _("loss"))
    a.set_title(_("loss"))
    b.plot(xs, [s["tokens_per_s"] for s in steps], marker="o", ms=3, color="tab:green")
    b.set_xlabel(_("optimizer step"))
    b.set_ylabel(_("useful tokens / s (all ranks)"))
    b.set_title(_("throughput (step 1 includes warm-up)"))
    fig.suptitle(_(title))
    return _save(fig, path)


def plot_methods(runs: dict[str, list[dict]], path) -> Path:
    """Training and held-out loss per optimizer step of each method's run (full, LoRA), one panel."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for (method, steps), color in zip(runs.items(), ("tab:blue", "tab:orange", "tab:green")):
        ax.plot([s["step"] for s in steps], [s["loss"] for s in steps], color=color, alpha=0.6,
                label=_("{method}: training loss").format(method=method))  # fmt: skip
        evals = [s for s in steps if s.get("eval_loss") is not None]
        ax.plot([s["step"] for s in evals], [s["eval_loss"] for s in evals], color=color, marker="s",
                label=_("{method}: held-out loss").format(method=method))  # fmt: skip
    ax.set_xlabel(_("optimizer step"))
    ax.set_ylabel(_("loss"))
    ax.legend()
    fig.suptitle(_("Full fine-tuning and LoRA, the same job"))
    return _save(fig, path)


def plot_thread_comparison(rows: list[dict], path, *, machine: str = "") -> Path:
    """Median tokens/s per thread setting (one bar each), every steady step as a dot and its min-max as a
    whisker: bars whose whiskers overlap are not a difference this run can show -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    labels = [r["label"] for r in rows]
    med = [r["tokens_per_s"] for r in rows]
    samples = [r.get("samples") or [r["tokens_per_s"]] for r in rows]
    ax.bar(
        labels,
        med,
        color="tab:blue",
        alpha=0.7,
        yerr=[[m - min(xs) for m, xs in zip(med, samples)], [max(xs) - m for m, xs in zip(med, samples)]],
        capsize=4,
    )
    for i, xs in enumerate(samples):
        ax.plot([i] * len(xs), xs, "k.", ms=4)
        ax.annotate(
            f"{med[i]:.0f}", (i, med[i]), ha="left", va="bottom", xytext=(6, 0), textcoords="offset points"
        )
    rounds = max((len(r.get("rounds") or [1]) for r in rows), default=1)
    steps = max((len(xs) for xs in samples), default=1)
    ax.set_ylabel(_("useful tokens / s (median; dots: steps)"))
    ax.set_title(
        _(
            "threads per rank: same ranks, {steps} steady steps each over {rounds} interleaved round(s)"
        ).format(steps=steps, rounds=rounds)
        + (f"\n{machine}" if machine else ""),
        fontsize=9,
    )
    return _save(fig, path)


def plot_slice(res: Mapping[str, Any], path) -> Path:
    """Left: the slice's tokens/s per steady step against the planner's prediction. Right: this CPU's GEMM
    TFLOPS per thread count over linear scaling -> the PNG's path."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    vals = res["tokens_per_s"]["values"]
    a.plot(range(2, len(vals) + 2), vals, marker="o", label=_("measured (steady steps)"))
    a.axhline(res["prediction"]["tokens_per_s"], color="tab:red", ls="--", label=_("planner's prediction"))
    a.set_xlabel(_("optimizer step"))
    a.set_ylabel(_("tokens / s (all ranks)"))
    a.set_ylim(bottom=0)
    a.legend(fontsize=8)
    sh = res["shape"]
    a.set_title(
        _("Llama-3-8B slice: {layers} layer(s), vocab {vocab:,}").format(
            layers=sh["layers"], vocab=sh["vocab"]
        )
    )
    curve = res["thread_curve"]
    ts = [int(t) for t in curve["tflops"]]
    meds = [sorted(v)[len(v) // 2] for v in curve["tflops"].values()]
    for t, v in curve["tflops"].items():
        b.scatter([int(t)] * len(v), v, s=10, color="tab:gray")
    b.plot(ts, meds, marker="o", label=_("measured median"))
    b.plot(ts, [meds[0] * t for t in ts], ls=":", color="black", label=_("linear from 1 thread"))
    b.set_xlabel(_("threads"))
    b.set_ylabel(f"{curve['dtype']} GEMM TFLOPS")
    b.set_title("x".join(map(str, curve["shape"])))
    b.legend(fontsize=8)
    m = res.get("machine") or {}
    fig.suptitle(
        f"{m.get('cpu_model', '?')}, {res.get('date', '?')}"
        + (" " + _("(under load)") if res.get("under_load") else "")
    )
    return _save(fig, path)
