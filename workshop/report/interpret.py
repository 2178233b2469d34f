"""What a chapter says about a run, computed from that run's numbers.

A notebook's prose is written once, on one machine; learners run it on every kind of CPU. So every sentence
that states a measured outcome (which precision wins, whether the network mattered, which thread layout won,
how far a model is from the measurements) is produced here from the numbers printed beside it, names the
machine it was measured on, and, where the expected effect does not show, says why in numbers and which
parameter makes it show. Stored results carry the machine and date they came from (`provenance`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from workshop.lang import _
from workshop.plan import hardware
from workshop.plan.gemm import GemmSummary
from workshop.report import verdict
from workshop.report.network import bandwidth  # noqa: F401 (chapter 05 calls interpret.bandwidth)


def machine(d: hardware.Detection | None = None) -> str:
    """One line (str) naming this machine the way results must be read: CPU, cores, ISA path, bf16, AMX."""

    d = d or hardware.detect(probe_onednn=False)
    native, _why = hardware.native_bf16()
    bf16 = _("native bf16") if native else _("no native bf16")
    amx = "AMX" if d.get("amx") else _("no AMX")
    return _("{cpu}, {cores} cores, {isa}, {bf16}, {amx}").format(
        cpu=d.get("cpu_model") or _("unknown CPU"),
        cores=d.get("cores"),
        isa=d.get("isa_class"),
        bf16=bf16,
        amx=amx,
    )


def measured_on(result: Mapping[str, Any] | None) -> str:
    """'CPU isa, N CPUs, date' of a stored result (what a figure's title and a table's column name).

    Results record their machine under one of three keys, by age: "env" (comms, loading), "machine" (ceiling),
    "peaks" (the paired benchmarks); all are read here, so no reader says "not recorded" wrongly."""
    if not result:
        return "-"
    env = {**(result.get("peaks") or {}), **(result.get("machine") or {}), **(result.get("env") or {})}
    cpu = (
        env.get("cpu_model")
        or env.get("cpu")
        or result.get("cpu_model")
        or (result.get("detect") or {}).get("cpu_model")
        or (env.get("bf16") or {}).get("path")
        or _("a machine not recorded")
    )
    isa = env.get("isa_class") or env.get("isa") or result.get("isa_class") or ""
    cores = env.get("cpus") or env.get("cores") or result.get("host_cores")
    when = (
        result.get("date")
        or env.get("date")
        or (result.get("measured_at") or "")[:10]
        or _("date not recorded")
    )
    counted = _(", {cores} CPUs").format(cores=cores) if cores else ""
    return f"{cpu}{f' {isa}' if isa and isa != cpu else ''}{counted}, {when}"


def provenance(result: Mapping[str, Any], *, here: str | None = None) -> str:
    """One line: where a stored result was measured (machine, date, versions), and whether that is this
    machine (`here`, a `machine()` line)."""
    env = result.get("env") or result.get("machine") or {}
    cpu = env.get("cpu_model") or env.get("cpu") or result.get("cpu_model")
    isa = env.get("isa_class") or env.get("isa") or ""
    env = {**(result.get("versions") or {}), **env}
    vers = ", ".join(f"{k} {env[k]}" for k in ("torch", "transformers", "deepspeed") if env.get(k))
    line = _("stored result, measured on {where}").format(where=measured_on(result)) + (
        f" ({vers})" if vers else ""
    )
    if here:
        same = bool(cpu and cpu.split(",")[0] in here and (not isa or isa in here))
        line += _("; this machine: {here}").format(here=here) + (
            "" if same else _(" -- numbers from another machine, not this run's")
        )
    return line


# ---------------------------------------------------------------- chapter 01: bf16 against fp32


def gemm_ratio_range(summary: GemmSummary, results: Sequence[Any] = ()) -> tuple[float, float, str] | None:
    """bf16 over fp32 (medians) in every cell measured in both precisions: the lowest, the highest and the
    conditions they span (thread counts, sizes); from the summary's per-thread ratios without `results`;
    None with fewer than two conditions."""
    cells: dict[tuple[int, int], dict[str, float]] = {(r.threads, r.size): {} for r in results}
    for r in results:
        cells[(r.threads, r.size)][r.dtype] = r.median
    ratios = {k: v["bf16"] / v["fp32"] for k, v in cells.items() if v.get("bf16") and v.get("fp32")}
    if len(ratios) >= 2:
        threads = sorted({t for t, _n in ratios})
        sizes = sorted({n for _t, n in ratios})
        said = _("{threads} thread(s) x n = {sizes}").format(
            threads="/".join(map(str, threads)), sizes="/".join(map(str, sizes))
        )
        return min(ratios.values()), max(ratios.values()), said
    by_t = summary.get("bf16_over_fp32_by_threads") or {}
    if len(by_t) >= 2:
        said = _("{threads} thread(s), each at its best size").format(
            threads="/".join(map(str, sorted(by_t)))
        )
        return min(by_t.values()), max(by_t.values()), said
    return None


def _gemm_reason(summary: GemmSummary, ratio: float) -> str:
    """Why bf16 beat fp32 by `ratio`, split into what the peaks allow (the bf16 path's FLOP per cycle over
    fp32's, same cores and clock) and what is left: how close each precision came to its own peak."""
    pb, pf = summary.get("peak_bf16_tflops"), summary.get("peak_fp32_tflops")
    if not (pb and pf):
        return _("bf16 ran on a native path that does more FLOP per cycle than fp32's")
    peaks, rest = pb / pf, ratio / (pb / pf)
    said = _(
        "bf16's peak is x{peaks:.3g} fp32's here (FLOP per cycle of the two paths, same cores and clock)"
    )
    if rest >= 1.1:
        said += _(
            "; the other x{rest:.2f} is fp32 running further below its own peak than bf16 (bf16 moves half "
            "the bytes per multiply)"
        )
    elif rest <= 0.9:
        said += _("; bf16 ran further below its own peak than fp32 did, which gives back x{back:.2f} of it")
    return said.format(peaks=peaks, rest=rest, back=1 / rest)


def gemm(summary: GemmSummary, d: hardware.Detection, results: Sequence[Any] = ()) -> str:
    """One sentence: which precision won this machine's GEMMs, by how much (x, TFLOPS against TFLOPS),
    with the range over every thread count and size measured (`results`: gemm_benchmark's cells), and the
    hardware reason."""
    ratio = summary.get("bf16_over_fp32")
    if not ratio:
        return _("bf16 or fp32 was not measured; no comparison to make.")
    where = machine(d)
    if summary.get("threads"):
        where += _(", both at {threads} thread(s)").format(threads=summary["threads"])
    span = gemm_ratio_range(summary, results)
    if span:  # the headline's cell is one of several: the others' ratios beside it, lowest to highest
        where += _("; x{lo:.2f}-x{hi:.2f} over the {conditions} measured").format(
            lo=span[0], hi=span[1], conditions=span[2]
        )
    kernel = d.get("onednn_bf16_impl") or _("no native bf16 kernel")
    if summary.get("bf16_samples") and summary.get("fp32_samples"):
        v = verdict.compare(
            summary["bf16_samples"], summary["fp32_samples"], a_label="bf16", b_label="fp32", unit="TFLOPS"
        )
        if not v.clear:  # the repeats overlap: no precision won here, whatever the medians say
            return _(
                "On this machine ({where}) bf16 against fp32 GEMMs: {said}. Either precision trains here; "
                "bf16 saves memory."
            ).format(where=where, said=v.sentence)
    if ratio >= 1.2:
        why = _gemm_reason(summary, ratio) + _(" (oneDNN ran {kernel})").format(kernel=kernel)
        return _(
            "On this machine ({where}) bf16 GEMMs ran x{ratio:.2f} as fast as fp32: {why}. Train "
            "in bf16 here."
        ).format(where=where, ratio=ratio, why=why)
    if ratio >= 0.8:
        return _(
            "On this machine ({where}) bf16 and fp32 GEMMs ran at about the same rate (x{ratio:.2f}): "
            "bf16 halves the bytes moved but adds no FLOPs per instruction here. Either precision trains; "
            "bf16 saves memory."
        ).format(where=where, ratio=ratio)
    return _(
        "On this machine ({where}) bf16 GEMMs ran at x{ratio:.3g} of fp32, i.e. {slower:.0f}x SLOWER: "
        "the CPU has no bf16 arithmetic (oneDNN: {kernel}), so every bf16 product is converted to fp32 and "
        "back. Train in fp32 here; precision 'auto' does. On an AMX Xeon (c7i/m7i/r7i) or a CPU with "
        "AVX512_BF16 the ratio reverses."
    ).format(where=where, ratio=ratio, slower=1 / ratio, kernel=kernel)


# ---------------------------------------------------------------- chapter 03: loading peaks


def loading(
    table: Sequence[Mapping[str, Any]],
    *,
    world_size: int = 2,
    model_gb: float | None = None,
    lcmu_peak_gb: float | None = None,
) -> list[str]:
    """What this run's loading table shows, as sentences: peak per method against naive, rank 0 against the
    others, and (given the `low_cpu_mem_usage=False` run's peak, GB) which method that run behaved like.
    `model_gb`: the model's size in GB (default: the table's model_bytes)."""
    rows = [r for r in table if r["world_size"] == world_size]
    if not rows:
        return [_("no runs at N = {n}; nothing to compare").format(n=world_size)]
    peak = {(r["method"], r["rank"]): r["peak_rss_gb"] for r in rows}
    naive = max(v for (m, _), v in peak.items() if m == "naive")
    base = min(r["baseline_rss_gb"] for r in rows)
    model_gb = model_gb if model_gb is not None else rows[0]["model_bytes"] / 1e9
    out = []
    if model_gb < 0.5 * base or (naive - min(peak.values())) / naive < 0.1:
        out.append(
            _(
                "a {model_gb:.3f} GB model against a {base:.2f} GB baseline per process (interpreter and "
                "libraries); peaks span only {low:.2f}-{naive:.2f} GB: the model is too small "
                'for the methods to differ; use a larger model (model = "medium") to see them apart.'
            ).format(model_gb=model_gb, base=base, low=min(peak.values()), naive=naive)
        )
    out += [
        _rank_peaks(m, peak, naive) for m in ("meta", "zero3", "zero3-stream") if any(k[0] == m for k in peak)
    ]
    out += _least_need(rows, peak, naive, world_size)
    out += _load_times(rows, world_size)
    one = {r["method"]: r["peak_rss_gb"] for r in table if r["world_size"] == 1}
    if lcmu_peak_gb is not None and {"meta", "naive"} <= set(one):
        like = min(("meta", "naive"), key=lambda m: abs(one[m] - lcmu_peak_gb))
        out.append(
            _(
                "from_pretrained(low_cpu_mem_usage=False) peaked at {peak:.2f} GB: meta (N = 1) "
                "{meta:.2f}, naive {naive:.2f} -> it loaded like {like}"
            ).format(peak=lcmu_peak_gb, meta=one["meta"], naive=one["naive"], like=like)
            + (_(": the argument is ignored") if like == "meta" else "")
        )
    return out


def _load_times(rows: Sequence[Mapping[str, Any]], world_size: int) -> list[str]:
    """What streaming shards cost in time in this run: one load per method and N is one sample each, so the
    seconds are given as a ratio to read, never as a verdict."""
    secs = {
        r["method"]: max(x["load_s"] for x in rows if x["method"] == r["method"])
        for r in rows
        if r.get("load_s")
    }
    if not {"zero3", "zero3-stream"} <= set(secs):
        return []
    return [
        _(
            "load time at N = {n}: zero3-stream {stream:.1f} s, zero3 {zero3:.1f} s (x{ratio:.2f}); one load "
            "per method, one sample each on this machine: a ratio to read, not a verdict"
        ).format(
            n=world_size,
            stream=secs["zero3-stream"],
            zero3=secs["zero3"],
            ratio=secs["zero3-stream"] / secs["zero3"],
        )
    ]


def _rank_peaks(method: str, peak: Mapping[tuple[str, int], float], naive: float) -> str:
    """One method's peak per rank as a multiple of naive's, and rank 0's extra when it carries the file."""
    ranks = sorted(r for (m, r) in peak if m == method)
    vals = [peak[(method, r)] / naive for r in ranks]
    return _("{method}: peak per rank = {ranks} of naive").format(
        method=method, ranks=", ".join(f"rank {r} x{v:.2f}" for r, v in zip(ranks, vals))
    ) + (
        _(" (rank 0 carries the mapped file: x{first:.2f} vs x{others:.2f})").format(
            first=vals[0], others=min(vals[1:])
        )
        if len(vals) > 1 and vals[0] - min(vals[1:]) > 0.1
        else ""
    )


def _least_need(
    rows: Sequence[Mapping[str, Any]], peak: Mapping[tuple[str, int], float], naive: float, world_size: int
) -> list[str]:
    """What a rank needs at worst (its peak while loading, or its resident size once every weight has been
    read), and the method that needs least."""
    need: dict[str, float] = {}
    for r in rows:
        need[r["method"]] = max(need.get(r["method"], 0.0), r["peak_rss_gb"], r.get("used_rss_gb") or 0.0)
    out = []
    used_meta = need.get("meta")
    if used_meta is not None and used_meta > 1.5 * max(v for (m, _), v in peak.items() if m == "meta"):
        out.append(
            _(
                "meta's low peak is file pages not yet read: once every weight is used a rank holds "
                "{used:.2f} GB, x{share:.2f} of naive's peak"
            ).format(used=used_meta, share=used_meta / naive)
        )
    best = min(need, key=need.__getitem__)
    out.append(
        _(
            "least memory any rank needs at N = {n}: {best} ({gb:.2f} GB, x{share:.2f} of "
            "naive's {naive:.2f} GB)"
        ).format(n=world_size, best=best, gb=need[best], share=need[best] / naive, naive=naive)
    )
    return out


# ---------------------------------------------------------------- chapter 04: threads and precision


def threads(rows: Sequence[Mapping[str, Any]], cores: int, nproc: int) -> str:
    """One sentence: which ranks x threads layout was faster here (tokens/s), only where the steps' spread
    lets one say so (report.verdict.compare of the fastest row's steady steps against the slowest's), and
    whether over-subscribing the `cores` with `nproc` ranks cost anything."""
    best = max(rows, key=lambda r: r["tokens_per_s"])
    worst = min(rows, key=lambda r: r["tokens_per_s"])
    if best is worst:
        return _("one thread setting ran; nothing to compare")
    v = verdict.compare(
        best.get("samples") or [best["tokens_per_s"]],
        worst.get("samples") or [worst["tokens_per_s"]],
        a_label=best["label"],
        b_label=worst["label"],
        rounds=min(len(best["rounds"]), len(worst["rounds"]))
        if best.get("rounds") and worst.get("rounds")
        else None,
    )
    over = [r for r in rows if nproc * r["threads"] > cores]
    if not v.clear:
        return _(
            "{said}, on {cores} physical cores: this run cannot tell the layouts apart; the thread count "
            "matters less here than whatever else the machine was doing (more rounds, compare_rounds, "
            "give a verdict)."
        ).format(said=v.sentence, cores=cores)
    line = _("{said}, on {cores} physical cores.").format(said=v.sentence, cores=cores)
    if best in over:
        line += _(
            " Here the over-subscribed layout ({nproc} x {threads} > {cores} cores) won: while one "
            "rank waits on gloo its core is free for the other's threads. The rule ranks x threads <= cores "
            "is a starting point to measure around, not a law."
        ).format(nproc=nproc, threads=best["threads"], cores=cores)
    else:
        line += _(
            " The faster layout keeps ranks x threads within the physical cores, the usual starting point."
        )
    return line


def ceiling_probes(res: Mapping[str, Any]) -> list[float]:
    """Every probe of the recipe's GEMM ceiling (TFLOPS, all ranks), in the order measured: start and end of
    each round; older results without them: the rounds' means."""
    rec, cfg = res["levers"]["recipe"], res["config"]
    key = f"{cfg['micro_batch'] * cfg['seq_len']}x{rec['precision']}"
    probes = [p["tflops"] for c in res.get("ceilings", {}).get(key, []) for p in (c["start"], c["end"])]
    return probes or list(rec["ceiling_tflops"]["values"])


def ceiling_share(res: Mapping[str, Any]) -> verdict.Share:
    """The recipe's step against its GEMM ceiling: every steady step against every probe of the ceiling (the
    start and end of each round), through report.verdict.share, so a ceiling that drifted gives a range."""
    rec = res["levers"]["recipe"]
    steps = [t * r["flops_per_token"] / 1e12 for r in rec["runs"] for t in r.get("step_tokens_per_s", [])]
    return verdict.share(
        steps or [r["model_tflops"] for r in rec["runs"]],
        ceiling_probes(res),
        part_label=_("the step"),
        reference_label=_("GEMM ceiling"),
        unit="TFLOPS",
    )


def ceiling(res: Mapping[str, Any]) -> list[str]:
    """Chapter 04's headline: the recipe's step as a share of the same cores' matmul rate at the model's own
    shapes, on the machine the result names, and what each measured lever did against its base; a share or a
    winner only where the samples support one (report.verdict)."""
    lv = res["levers"]
    rec = lv.get("recipe", {})
    if rec.get("status") != "measured":
        return [_("the recipe was not measured: {reason}").format(reason=rec.get("reason", "no run"))]
    nproc = res["config"]["nproc"]
    per_rank = rec["model_tflops"]["median"] / nproc
    sh = ceiling_share(res)
    probes = [p / nproc for p in ceiling_probes(res)]
    # one ceiling only where it held still; a drifting one is quoted as the range its probes spanned
    ceil = f"{per_rank * 100 / sh.pct:.3g}" if sh.clear else f"{min(probes):.3g}-{max(probes):.3g}"
    unit = "GPU" if res.get("device") == "cuda" else "rank"
    rows = res["config"]["micro_batch"] * res["config"]["seq_len"]
    head = _(
        "{where} ({isa}): the workbook recipe's step computes {per_rank:.3g} model TFLOPS per {unit}; the "
        "same cores reach {ceil} TFLOPS per {unit} on the model's own matmuls ({rows} "
        "rows, {precision}). {share}."
    ).format(
        where=measured_on(res),
        isa=res["isa_path"],
        per_rank=per_rank,
        unit=unit,
        ceil=ceil,
        rows=rows,
        precision=rec["precision"],
        share=sh.sentence[:1].upper() + sh.sentence[1:],
    )
    where = measured_on(res) if is_stored(res) else None
    out = [head] + [_lever_line(res, name, sh.clear, where) for name in lv if name != "recipe"]
    if sh.clear:
        out.append(
            _(
                "The other {rest:.0f}% is what the step spends beyond those matmuls at that rate: "
                "attention, norms, activations, the loss, the optimizer and the all-reduce (each a pass over "
                "memory), and its matmuls running below the ceiling between them. That work grows with the "
                "model's width, the matmuls with its square: the share rises with the model where the rest "
                "of the step stays the same. Under ZeRO-3 on the real 8B shape the gathers and the optimizer "
                "grow with it too, and the slice below reaches a lower share of its ceiling."
            ).format(rest=100 - sh.pct)
        )
    else:
        out.append(
            _(
                "No share is read from this run: the samples above do not support one number. Re-run `python "
                "-m workshop bench ceiling` (more rounds) on an idle machine for a share you can trust."
            )
        )
    return out


def stored_against_live(stored: Mapping[str, Any], live: Mapping[str, Any]) -> str:
    """The stored result's step share beside this run's: from another machine neither confirms the other;
    on the same CPU, ranges that do not overlap are said to contradict the stored one."""
    if "recipe" not in stored["levers"] or live["levers"].get("recipe", {}).get("status") != "measured":
        return _("this run measured no step share to set beside the stored one")
    s, v = ceiling_share(stored), ceiling_share(live)
    got = {
        "stored": f"{s.low:.0f}-{s.high:.0f}%, {measured_on(stored)}",
        "live": f"{v.low:.0f}-{v.high:.0f}%",
    }
    if stored["machine"].get("cpu_model") != live["machine"].get("cpu_model"):
        return _(
            "the stored step share of its ceiling ({stored}) is another CPU's: this run's ({live}) neither "
            "confirms nor contradicts it"
        ).format(**got)
    if s.low <= v.high and v.low <= s.high:
        return _("this run's step share ({live}) overlaps the stored one ({stored}) on the same CPU").format(
            **got
        )
    return _(
        "this run's step share ({live}) CONTRADICTS the stored one ({stored}) on the same CPU: read the "
        "stored table as that run's, not this machine's today"
    ).format(**got)


def is_stored(res: Mapping[str, Any]) -> bool:
    """A result read from a file (`save` adds when it was measured), not one this run just made."""
    return bool(res.get("measured_at") or res.get("date"))


def pct_text(pct: float, low: float, high: float, clear: bool) -> str:
    """A share as one number only where it can be read as one; otherwise only its range."""
    if clear:
        return f"{pct:.0f}%"
    return _("between {lo:.0f}% and {hi:.0f}%").format(lo=low, hi=high)


def _lever_line(res: Mapping[str, Any], name: str, recipe_clear: bool, where: str | None) -> str:
    """One lever: its share of the ceiling (a range where the recipe's share was refused or its own ceiling
    drifted) and what it did against its base, judged now from its samples (or why it cannot be)."""
    v, rec = res["levers"][name], res["levers"]["recipe"]
    if v["status"] != "measured":
        return f"  {_(v['label'])}: {_(v['status'])} ({_(v.get('reason', ''))})"
    other = v.get("precision") != rec["precision"]
    sh, pc = v.get("share"), v["pct_of_ceiling"]
    lo, hi, clear = (sh["low"], sh["high"], sh["clear"]) if sh else (pc["min"], pc["max"], True)
    pct = pct_text(pc["median"], min(lo, pc["median"]), max(hi, pc["median"]), clear and recipe_clear)
    if v.get("base"):
        word, cmp = verdict.rejudge(res, name, where)
        said = (
            cmp.sentence
            if cmp
            else _("x{effect:.2f} the tokens/s of {base}; {why}").format(
                effect=(v.get("effect_vs_base") or {}).get("median", 1.0), base=v["base"], why=_(word)
            )
        )
    else:
        said = _("no base to compare with")
    return (
        f"  {_(v['label'])}: {pct}"
        + (_(" of the {precision} ceiling").format(precision=v["precision"]) if other else "")
        + f"; {said}"
    )


# ---------------------------------------------------------------- runtimes


class Stopwatch:
    """A chapter's own runtime, stated at its end instead of a promise written on another machine: its repr
    is the sentence, seconds since it was made and the machine."""

    def __init__(self):
        self.start = time.perf_counter()

    def __repr__(self) -> str:
        return _("this chapter has run {seconds:.0f} s on {machine}").format(
            seconds=time.perf_counter() - self.start, machine=machine()
        )
