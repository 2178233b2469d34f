"""Figures for the notebooks: each function takes data and a path, saves a PNG (Agg), returns the path.

The path it returns is a `Figure`: still a path (print it, open it, pass it on), and also the picture when it
is the last value of a notebook cell, so the figure shows inline on the first Run All, in JupyterLab, in
papermill's saved output and in nbval alike, without a markdown image that points at a file not yet written.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from workshop.lang import N_, _
from workshop.report import fonts

fonts.apply()  # Korean figures get a font with Hangul (WORKSHOP_LANG=ko); English ones are unchanged

if TYPE_CHECKING:
    from workshop.plan.gemm import GemmCell
    from workshop.plan.reconcile import StageRow
    from workshop.plan.traffic import BandwidthPoint

    _ConcretePath = Path
else:  # Path itself cannot be subclassed before Python 3.12: derive from this OS's PosixPath or WindowsPath
    _ConcretePath = type(Path())


class Figure(_ConcretePath):
    """A saved PNG's path that Jupyter displays as the picture (IPython's `_repr_png_` protocol)."""

    def _repr_png_(self) -> bytes:
        return self.read_bytes()


def _save(fig, path, *, rect=None) -> Figure:
    """`rect`: the part of the figure tight_layout may fill (room left for a figure legend)."""
    path = Figure(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- chapter 06 (comms)


def plot_original_prediction(rows: list[dict], path) -> Path:
    """Predicted vs measured seconds per optimizer step per original-workshop topology -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    labels = [r["label"].replace(" x ", "x").replace(".48xlarge", "").replace(".24xlarge", "") for r in rows]
    xs = range(len(rows))
    ax.bar(
        [x - 0.2 for x in xs], [r["measured_s"] for r in rows], 0.4, label=_("measured (original workshop)")
    )
    ax.bar([x + 0.2 for x in xs], [r["predicted_s"] for r in rows], 0.4, label=_("model"))
    for x, r in zip(xs, rows):
        if r.get("fitted"):
            ax.annotate(_("fitted"), (x + 0.2, r["predicted_s"]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(_("seconds per optimizer step"))
    ax.set_title(_("Llama-3-8B ZeRO-3 + CPU offload, 4 GPUs: model vs the original workshop"))
    ax.legend()
    return _save(fig, path)


def plot_bytes_by_stage(traffic: dict[int, dict], path, *, title: str = "") -> Path:
    """Stacked GB per rank per step, ZeRO stages 0-3: which collective grows with each -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    stages = sorted(traffic)
    bottom = [0.0] * len(stages)
    for key in ("all_reduce", "reduce_scatter", "all_gather", "pcie_h2d"):
        vals = [traffic[s][key] / 1e9 for s in stages]
        ax.bar([str(s) for s in stages], vals, bottom=bottom, label=key.replace("_", "-"))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel(_("ZeRO stage"))
    ax.set_ylabel(_("GB per rank per optimizer step"))
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_step_vs_bandwidth(
    sweep: list[BandwidthPoint], path, *, marks: dict[str, float] | None = None, title: str = ""
) -> Path:
    """Step time (s) against link bandwidth (GB/s, log x), the named links marked -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.plot([p["gbytes_per_s"] for p in sweep], [p["step_s"] for p in sweep])
    ax.set_xscale("log")
    for name, bw in (marks or {}).items():
        ax.axvline(bw, ls=":", color="grey")
        ax.text(bw, ax.get_ylim()[1] * 0.95, name, rotation=90, va="top", fontsize=8)
    ax.set_xlabel(_("effective bandwidth between ranks (GB/s)"))
    ax.set_ylabel(_("seconds per optimizer step"))
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_collective_bench(
    rows: Sequence[Mapping[str, Any]],
    path,
    *,
    fits: dict[str, list[tuple[float, float]]] | None = None,
    fit_labels: dict[str, str] | None = None,
    title: str = "",
) -> Path:
    """Bus bandwidth over message size, one line per collective (nccl-tests convention), and, dashed in the
    same colour, the fitted latency + bandwidth model at the same sizes: a fit that misses its own points
    shows."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for op in sorted({r["op"] for r in rows}):
        pts = sorted((r["bytes"], r["busbw_gbytes_per_s"]) for r in rows if r["op"] == op)
        (line,) = ax.plot([p[0] / 1e6 for p in pts], [p[1] for p in pts], marker="o", label=op)
        curve = (fits or {}).get(op)
        if curve:
            ax.plot(
                [c[0] / 1e6 for c in curve],
                [c[1] for c in curve],
                ls="--",
                color=line.get_color(),
                label=(fit_labels or {}).get(op, f"{op} fit"),
            )
    ax.set_xscale("log")
    ax.set_xlabel(_("message size (MB)"))
    ax.set_ylabel(_("bus bandwidth (GB/s)"))
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def plot_local_prediction(rows: list[dict], path, *, machine: str = N_("machine not recorded")) -> Path:
    """Local check: measured vs predicted step time (s) per case, the +-20% band drawn -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(7.5, 4))
    xs = range(len(rows))
    meas = [r["measured_s"] for r in rows]
    ax.bar([x - 0.2 for x in xs], meas, 0.4, label=_("measured"))
    ax.bar([x + 0.2 for x in xs], [r["predicted_s"] for r in rows], 0.4, label=_("model"))
    ax.errorbar(
        [x + 0.2 for x in xs],
        meas,
        yerr=[0.2 * m for m in meas],
        fmt="none",
        ecolor="grey",
        capsize=4,
        label=_("measured +-20%"),
    )
    ax.set_xticks(list(xs), [r["label"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(_("seconds per optimizer step"))
    ax.set_title(
        _("ZeRO-3 over gloo, model vs measurement\nmeasured on {machine}").format(machine=_(machine)),
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return _save(fig, path)


# ---------------------------------------------------------------- chapter 01 (AMX, instance selection)


def plot_gemm_tflops(results: list[GemmCell], peaks: dict, path, *, machine: str = "") -> Path:
    """bf16 vs fp32 GEMM TFLOPS by size (median bar, best-worst whisker) at each thread count, with peak
    lines -> the PNG's path.

    `results` rows have size, dtype, threads, median_tflops, best_tflops, worst_tflops. `peaks` maps each
    thread count to {label: TFLOPS} (`gemm.summarize(...)["peaks_by_threads"]`): every panel draws the
    peaks of ITS thread count, so a 1-thread bar is read against a 1-core peak. The legend sits below the
    panels.
    """
    threads = sorted({r["threads"] for r in results})
    fig, axes = plt.subplots(1, len(threads), figsize=(4.6 * len(threads), 4.4), squeeze=False, sharey=True)
    colors = {"bf16": "tab:blue", "fp32": "tab:orange"}
    for ax, t in zip(axes[0], threads):
        rows = [r for r in results if r["threads"] == t]
        sizes = sorted({r["size"] for r in rows})
        for i, dtype in enumerate(("bf16", "fp32")):
            cells = {r["size"]: r for r in rows if r["dtype"] == dtype}
            xs = [j + (i - 0.5) * 0.38 for j, s in enumerate(sizes) if s in cells]
            med = [cells[s]["median_tflops"] for s in sizes if s in cells]
            lo = [cells[s]["median_tflops"] - cells[s]["worst_tflops"] for s in sizes if s in cells]
            hi = [cells[s]["best_tflops"] - cells[s]["median_tflops"] for s in sizes if s in cells]
            ax.bar(
                xs,
                med,
                0.38,
                yerr=[lo, hi],
                capsize=3,
                color=colors[dtype],
                label=_("{dtype} (median)").format(dtype=dtype),
            )
        merged: dict[
            float, list[str]
        ] = {}  # equal peaks (no native bf16: bf16 peak = fp32 peak) share one line
        for label, value in (peaks.get(t) or peaks.get(str(t)) or {}).items():
            if value:
                merged.setdefault(value, []).append(_(label))
        for k, (label, value) in enumerate((" = ".join(ls), v) for v, ls in merged.items()):
            ax.axhline(value, ls=("--", ":", "-.")[k % 3], color="0.3", lw=1)
            ax.annotate(
                f"{label}: {value:.2f}", (len(sizes) - 0.5, value), ha="right", va="bottom", fontsize=7
            )
        ax.set_xticks(range(len(sizes)), [f"{s}" for s in sizes])
        ax.set_xlabel(_("n (n x n GEMM)"))
        ax.set_title(_("{t} thread(s): peaks of {t} core(s)").format(t=t))
        ax.set_yscale("log")
    axes[0][0].set_ylabel(_("TFLOPS (log)"))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(
        _("GEMM throughput vs theoretical peak (whiskers: best and worst repeat)")
        + (f"\n{machine}" if machine else "")
    )
    return _save(fig, path, rect=(0, 0.06, 1, 1))


def plot_memory_stages(rows: list[StageRow], path) -> Path:
    """Planned cumulative GiB per rank per ZeRO-3 stage vs the original workshop's log -> the PNG's path."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["plan_gib"] for r in rows], 0.4, label=_("planner"))
    original = [(x, v) for x, r in zip(xs, rows) if (v := r.get("original_gib")) is not None]
    ax.bar(
        [x + 0.2 for x, _ in original], [v for _, v in original], 0.4, label=_("original workshop (measured)")
    )
    labels = [
        textwrap.fill(r["stage"].replace("After ", "").replace("initializing", "init"), 24) for r in rows
    ]
    ax.set_xticks(list(xs), labels, rotation=30, ha="right", fontsize=8)  # wrapped, never cut
    ax.set_ylabel(_("GiB per rank"))
    ax.set_title(_("Llama-3-8B, ZeRO-3 + offload, 4 ranks: planner vs the original workshop's log"))
    ax.legend()
    return _save(fig, path)


# ---------------------------------------------------------------- chapter 05 (multi-node, netsim)


def plot_netsim(rows: list[dict], path, *, machine: str = "") -> Path:
    """Per rate cap: median step time (s, left) and MB each simulated node sent (right) -> the PNG's path."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
    labels = [r["rate"] for r in rows]
    times = [r.get("step_time_s_median") or 0.0 for r in rows]
    a.bar(labels, times, color="tab:blue")
    for i, t in enumerate(times):
        a.annotate(f"{t:.2f} s", (i, t), ha="center", va="bottom")
    a.set_ylabel(_("median seconds per optimizer step"))
    a.set_title(_("step time vs per-node rate cap"))
    if machine:
        fig.suptitle(machine, fontsize=9)
    nodes = max((len(r.get("mb_sent_per_node") or []) for r in rows), default=0)
    width = 0.8 / max(nodes, 1)
    for n in range(nodes):
        sent = [(r.get("mb_sent_per_node") or [None] * nodes)[n] or 0.0 for r in rows]
        b.bar(
            [i - 0.4 + width * (n + 0.5) for i in range(len(rows))],
            sent,
            width,
            label=_("node {n}").format(n=n),
        )
    b.set_xticks(range(len(rows)), labels)
    b.set_ylabel(_("MB sent during the run"))
    b.set_title(_("bytes on the wire per node"))
    if nodes:
        b.legend()
    return _save(fig, path)


# ---------------------------------------------------------------- chapter 03 (sharded loading)


def plot_loading_peaks(
    rows: Sequence[Mapping[str, Any]], path, *, title: str = N_("Peak RSS while loading, per rank")
) -> Path:
    """Peak RSS (GB) per method and world size, a bar per rank (anon solid, file hatched) -> PNG path."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["world_size"]), []).append(r)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    labels: list[tuple[float, str]] = []
    x, width = 0.0, 0.38
    named: set[int | str] = set()  # what the legend has already: rank numbers, "plan", "used"
    for (method, n), ranks in groups.items():
        ranks = sorted(ranks, key=lambda r: r["rank"])
        for j, r in enumerate(ranks):
            pos = x + (j - (len(ranks) - 1) / 2) * width
            anon = r.get("peak_anon_gb", r["peak_rss_gb"])
            ax.bar(pos, anon, width * 0.95, color=f"C{j}", label=None if j in named else f"rank {j}")
            named.add(j)
            ax.bar(
                pos,
                r["peak_rss_gb"] - anon,
                width * 0.95,
                bottom=anon,
                color=f"C{j}",
                alpha=0.4,
                hatch="//",
                edgecolor="white",
            )
            if r.get("plan_load_gb") is not None:
                ax.plot(
                    [pos - width / 2, pos + width / 2],
                    [r["plan_load_gb"]] * 2,
                    color="black",
                    lw=1.5,
                    label=None if "plan" in named else _("planner (measured baseline)"),
                )
                named.add("plan")
            if r.get("used_rss_gb") is not None:
                ax.plot(
                    pos,
                    r["used_rss_gb"],
                    marker="x",
                    color="black",
                    ls="none",
                    label=None if "used" in named else _("after every weight is read once"),
                )
                named.add("used")
        labels.append((x, f"{method}\nN={n}"))
        x += 1.0
    ax.set_xticks([p for p, _ in labels], [t for _, t in labels], fontsize=8)
    ax.set_ylabel(_("GB (peak resident)"))
    first, _nl, rest = _(title).partition("\n")
    ax.set_title(
        _("{first} (hatched: mmap'd file pages)").format(first=first) + (f"\n{rest}" if rest else ""),
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return _save(fig, path)


# ---------------------------------------------------------------- benchmarks (workshop bench)


def plot_bench_recipes(bars: list[dict], path, *, machine: str = "") -> Path:
    """Median useful tokens/s per training variant (log scale) with min-max whiskers over interleaved runs.

    `bars` rows have label, median, min, max (a workshop.experiments.bench Stats as dict plus a label),
    slowest first.
    """
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    xs = range(len(bars))
    med = [b["median"] for b in bars]
    ax.bar(
        xs,
        med,
        0.6,
        color=[f"C{i}" for i in xs],
        yerr=[[b["median"] - b["min"] for b in bars], [b["max"] - b["median"] for b in bars]],
        capsize=4,
    )
    for x, b in zip(xs, bars):
        ax.annotate(f"{b['median']:.0f}", (x, b["max"]), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [b["label"] for b in bars], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(_("useful tokens / s (median, log)"))
    ax.set_title(
        _("Same model, same corpus, same steps, 2 ranks (whiskers: min-max over runs)")
        + (_("\nstored result, measured on {machine}").format(machine=machine) if machine else ""),
        fontsize=9,
    )
    return _save(fig, path)


def plot_ceiling(
    rows: Sequence[Mapping[str, Any]],
    path,
    *,
    title: str = N_("training step vs this machine's GEMM ceiling"),
    effect_label: str = N_("tokens/s vs its base (x, paired per round)"),
) -> Path:
    """Per lever: the step's model-FLOP rate as % of the same cores' GEMM ceiling (left) and its effect on
    tokens/s against its base (right); whiskers are min-max over interleaved rounds.

    `rows` are workshop.experiments.ceiling.rows() of measured levers (pct_of_ceiling, pct_range, effect,
    effect_range).
    """
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 0.42 * len(rows) + 1.6), sharey=True)
    ys = list(range(len(rows)))[::-1]
    pct = [r["pct_of_ceiling"] for r in rows]
    # a lever in another precision (fp32 where the recipe is bf16) is % of ITS ceiling: hatched, and said so
    other = [bool(r.get("ceiling_of")) for r in rows]
    # where the text gives only a range (the ceiling drifted), the figure draws only that range: a span
    span = [not r.get("share_clear", True) for r in rows]
    for y, p, r, o, sp in zip(ys, pct, rows, other, span):
        lo, hi = r["pct_range"]
        if sp:
            ax1.barh(y, hi - lo, 0.6, left=lo, color="0.85", edgecolor="tab:blue", hatch="..")
            continue
        bar = ax1.barh(y, p, 0.6, color="0.75" if o else "tab:blue", xerr=[[p - lo], [hi - p]], capsize=3)[0]
        if o:
            bar.set(hatch="//", edgecolor="0.4")
    ax1.set_yticks(
        ys,
        [
            r["label"]
            + (_("\n(of the {ceiling})").format(ceiling=r["ceiling_of"]) if r.get("ceiling_of") else "")
            for r in rows
        ],
        fontsize=8,
    )
    ax1.set_xlabel(
        _("step model FLOP/s, % of GEMM ceiling")
        + ("\n" + _("dotted span: the ceiling drifted, the share is only a range") if any(span) else "")
    )
    _effect_panel(ax2, ys, rows, effect_label)
    fig.suptitle(_(title), fontsize=10)
    return _save(fig, path)


def _effect_panel(ax, ys: list[int], rows: Sequence[Mapping[str, Any]], effect_label: str) -> None:
    """Each lever's effect on tokens/s against its base (x), min-max whiskers, the 1.0 line kept in view; a
    lever with no verdict (one round, or within noise) is drawn as the grey span of its range, not a bar."""
    eff = [r["effect"] or 1.0 for r in rows]
    lo = [e - (r["effect_range"] or (e, e))[0] for e, r in zip(eff, rows)]
    hi = [(r["effect_range"] or (e, e))[1] - e for e, r in zip(eff, rows)]
    for y, e, r, d_lo, d_hi in zip(ys, eff, rows, lo, hi):
        if not r.get("clear", True):  # no winner (one round, or within noise): the range it spans, in grey
            ax.barh(y, d_lo + d_hi or 0.002, 0.6, left=e - d_lo, color="0.8", edgecolor="0.4", hatch="..")
            continue
        col = "tab:green" if e >= 1 else "tab:red"
        ax.barh(y, e - 1, 0.6, left=1, xerr=[[d_lo], [d_hi]], capsize=3, color=col)
    ax.axvline(1, color="0.3", lw=1)
    left = min([1.0] + [e - d for e, d in zip(eff, lo)])
    right = max([1.0] + [e + d for e, d in zip(eff, hi)])
    pad = 0.08 * (right - left or 1.0)
    ax.set_xlim(left - pad, right + pad)  # the 1.0 line (no change) stays inside the axes
    ax.set_xlabel(_(effect_label))


# ---------------------------------------------------------------- chapter 02 (Karpenter)


def plot_pool_admission(
    rows: list[dict],
    path,
    *,
    need_gib: float | None = None,
    title: str = N_("Which instance types each NodePool may launch"),
) -> Path:
    """vCPUs vs memory of every candidate type, marked by which pool admits it (the plan's memory as a line).

    rows: dicts with instance_type, vcpus, memory_gib, workbook (bool), original (bool): the original
    workshop's pool. Returns the PNG's path.
    """
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    # drawn bottom to top; hollow rings stay visible where two types share vCPUs and memory (48xlarge / metal)
    styles: list[tuple[str, Callable[[dict], bool], dict[str, Any]]] = [  # (legend, rows, scatter kwargs)
        (
            N_("neither"),
            lambda r: not r["original"] and not r["workbook"],
            {"c": "lightgray", "marker": ".", "s": 40},
        ),
        (
            N_("original workshop's pool only"),
            lambda r: r["original"] and not r["workbook"],
            {"c": "tab:red", "marker": "x", "s": 40},
        ),
        (
            N_("workbook pool only"),
            lambda r: r["workbook"] and not r["original"],
            {"facecolors": "none", "edgecolors": "tab:blue", "marker": "o", "s": 140, "linewidths": 1.5},
        ),
        (
            N_("both pools"),
            lambda r: r["workbook"] and r["original"],
            {"c": "tab:green", "marker": "o", "s": 35},
        ),
    ]
    for label, pick, style in styles:
        sel = [r for r in rows if pick(r)]
        if sel:
            ax.scatter(
                [r["vcpus"] for r in sel],
                [r["memory_gib"] for r in sel],
                label=f"{_(label)} ({len(sel)})",
                **style,
            )
    if need_gib:
        ax.axhline(need_gib, ls="--", c="k", lw=1)
        ax.annotate(
            _("memory one node needs: {gib:.0f} GiB").format(gib=need_gib),
            (min(r["vcpus"] for r in rows), need_gib),
            va="bottom",
            fontsize=8,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel(_("vCPUs"))
    ax.set_ylabel(_("memory (GiB)"))
    ax.set_title(_(title))
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


# ---------------------------------------------------------------- chapter 01 (cost planner)


def plot_cost_time(plans: Sequence[Mapping[str, Any]], path, *, title: str = "") -> Path:
    """Hours against USD per plan (log axes): CPU circles, GPU triangles, Pareto front joined -> PNG path."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for device, marker, color in (("cpu", "o", "tab:blue"), ("gpu", "^", "tab:orange")):
        mine = [p for p in plans if p["device"] == device and p["usd"]]
        ax.scatter(
            [p["hours"] for p in mine],
            [p["usd"] for p in mine],
            marker=marker,
            s=28,
            alpha=0.6,
            color=color,
            label=_("{device} plans ({n})").format(device=device.upper(), n=len(mine)),
        )
    front = sorted((p for p in plans if p["pareto"]), key=lambda p: p["hours"])
    ax.plot(
        [p["hours"] for p in front],
        [p["usd"] for p in front],
        "k--",
        lw=1,
        label=_("time-vs-cost Pareto front"),
    )
    for p in front:
        ax.annotate(
            f"{p['nodes']}x{p['instance_type']}",
            (p["hours"], p["usd"]),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(_("hours for the token budget (log)"))
    ax.set_ylabel(_("on-demand USD (log)"))
    ax.set_title(_(title) if title else _("Every plan that fits: time against cost"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
