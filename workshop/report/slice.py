"""`workshop bench slice`'s result (chapter 04) in sentences: what was trained, its rate with the spread, the
step's split, memory, the shares of the GEMM ceiling and of the peak, and the planner's prediction beside
it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workshop.lang import _


def slice_lines(res: Mapping[str, Any]) -> list[str]:
    """`workshop bench slice`'s result in sentences: what was trained, tokens/s with its spread, the step's
    split, memory, the shares of the GEMM ceiling and of the peak, and the planner's prediction beside it."""
    t = res["tokens_per_s"]
    out = [
        _shape_line(res),
        _("memory check: {note}").format(note=res["memory_check"]["note"]),
        res["cores"]["sentence"],
        _(
            "measured: {tps:.1f} tokens/s ({per:.1f} per core), {n} steps after warm-up, "
            "{lo:.1f}-{hi:.1f} (spread {spread:.0f}%)"
        ).format(
            tps=t["median"], per=t["per_core"], n=t["n"], lo=t["min"], hi=t["max"], spread=t["spread_pct"]
        ),
        _split_line(res),
    ]
    rss = res.get("peak_rss_gb_per_rank") or []
    out.append(_("peak memory per rank: {rss} GB").format(rss=", ".join(f"{x:.2f}" for x in rss)))
    out.append(res["share_of_ceiling"]["sentence"])
    if res["peak"].get("tflops"):
        out.append(_peak_line(res))
    out.append(_prediction_line(res))
    out.extend(_term_lines(res))
    out.append(_calibration_line(res))
    out.extend(_thread_lines(res))
    if res.get("under_load"):
        out.append(_load_line(res["load"]))
    elif not res["share_of_ceiling"].get("clear", True) and any("other_cpus_busy" in x for x in res["load"]):
        out.append(_self_drift_line(res["load"]))
    return out


def _self_drift_line(loads: list[Mapping[str, Any]]) -> str:
    """A ceiling that moved past the bound while no other process used the CPUs: not other work's doing."""
    return _(
        "no other process kept these CPUs busy while it was measured (at most {busy:.2f} of {cpus}): the "
        "GEMM ceiling moved by itself (this machine's clock under sustained load, or the probe's own "
        "spread), not by other work"
    ).format(busy=max(x.get("other_cpus_busy", 0.0) for x in loads), cpus=loads[0]["logical_cpus"])


def _load_line(loads: list[Mapping[str, Any]]) -> str:
    """Why the result says it was measured under load: other processes' CPU use (a newer file), or the
    1-minute load average an older file recorded (which held the bench's own work too)."""
    busy = [x for x in loads if "other_cpus_busy" in x]
    if busy:
        worst = max(busy, key=lambda x: x["other_cpus_busy"])
        window: str = worst["window"]  # N_-marked where it was written (experiments.slice)
        return _(
            "measured under load: other processes kept {busy:.2f} of {cpus} CPUs busy {window} "
            "({cpu_s:.1f} CPU-seconds over {wall:.0f} s): other work shared these cores"
        ).format(
            busy=worst["other_cpus_busy"], cpus=worst["logical_cpus"], window=_(window),
            cpu_s=worst["other_cpu_s"], wall=worst["wall_s"],
        )  # fmt: skip
    return _(
        "measured under load (1-minute load average {load} on {cpus} vCPUs, which also counts this bench's "
        "own work): other work may have shared these cores"
    ).format(load=max(x["loadavg_1min"] for x in loads), cpus=loads[0]["logical_cpus"])


def _shape_line(res: Mapping[str, Any]) -> str:
    sh = res["shape"]
    return _(
        "slice of Llama-3-8B: {layers} layer(s), vocab {vocab:,}, {params:,.0f} M params; seq {seq}, "
        "micro-batch {mb}, {ranks} ranks x {threads} thread(s), ZeRO-3 over gloo, {precision}"
    ).format(
        layers=sh["layers"],
        vocab=sh["vocab"],
        params=sh["params"] / 1e6,
        seq=sh["seq_len"],
        mb=sh["micro_batch"],
        ranks=sh["ranks"],
        threads=sh["threads"],
        precision=res["precision"],
    )


def _split_line(res: Mapping[str, Any]) -> str:
    split = res["step_split"]
    if not split.get("measured"):
        return _("step split: not measured ({why})").format(why=split.get("why"))
    return _(
        "step {step:.2f} s: forward+backward {fb:.2f} s (of it the gradient reduce {ar:.2f} s), "
        "optimizer {opt:.2f} s (DeepSpeed's timers, rank 0); ZeRO-3's parameter gathers run inside "
        "forward and backward and are not timed apart"
    ).format(
        step=res["step_s"]["median"],
        fb=split["forward_backward_s"],
        ar=split.get("allreduce_s") or 0.0,
        opt=split["optimizer_s"] or 0.0,
    )


def _peak_line(res: Mapping[str, Any]) -> str:
    """The step's share of the stated peak over the measured steps (their range, as the tokens/s spread):
    one median would read as the single share the ceiling line may have refused."""
    pk, tps = res["peak"], res["tokens_per_s"]
    lo, hi = (pk["pct"] * tps[k] / tps["median"] for k in ("min", "max"))
    clock_source = pk["clock_source"]
    return _(
        "{lo:.1f}-{hi:.1f}% of this CPU's {precision} peak over the measured steps: {peak:.3f} TFLOPS = "
        "{cores} cores x {clock:g} GHz ({source}) x its FLOP/cycle ({path})"
    ).format(
        lo=lo,
        hi=hi,
        precision=res["precision"],
        peak=pk["tflops"],
        cores=pk["cores"],
        clock=pk["clock_ghz"],
        source=_(clock_source),
        path=pk["path"],
    )


def _prediction_line(res: Mapping[str, Any]) -> str:
    p = res["prediction"]
    lo, hi = p.get("tokens_per_s_range") or (p["tokens_per_s"], p["tokens_per_s"])
    line = _(
        "the planner predicted {pred:.1f} tokens/s (compute {c:.2f} s + collectives {m:.2f} s + "
        "optimizer "
        "{o:.2f} s per step); measured / predicted = {ratio:.2f} ({lo:.2f}-{hi:.2f})"
    ).format(
        pred=p["tokens_per_s"],
        c=p["compute_s"],
        m=p["comm_s"],
        o=p["optimizer_s"],
        ratio=res["ratio_measured_over_predicted"],
        lo=res["ratio_range"][0],
        hi=res["ratio_range"][1],
    )
    if hi > 1.01 * lo:  # the GEMM ceiling moved while the slice trained: so does the prediction
        line += _(
            "; at the GEMM ceiling measured before and after the run instead: {lo:.1f}-{hi:.1f} tokens/s"
        ).format(lo=lo, hi=hi)
    return line


def _calibration_line(res: Mapping[str, Any]) -> str:
    """Which stored slice the planner's CPU rate came from, and whether this comparison is in-sample."""
    cal = res["prediction"].get("calibration")
    if not cal:  # a slice.json from before the rate was carried by the GEMM ceiling
        return _("the planner's CPU rate: {source}").format(source=res["prediction"]["sources"]["efficiency"])
    line = _(
        "the planner's CPU rate: the stored slice's compute share of its GEMM ceiling ({path}: {shape}; "
        "{cpu}, {date}) x this run's GEMM ceiling {ceiling:.3f} TFLOPS"
    ).format(
        path=cal["path"], shape=cal["shape"], cpu=cal["cpu_model"], date=cal["date"],
        ceiling=cal["ceiling_tflops"],
    )  # fmt: skip
    if cal.get("in_sample"):
        line += _(
            "; in-sample: that slice has this shape and this CPU model, so the ratio checks the repeat and "
            "the modelled collectives and optimizer, not the compute share"
        )
    else:  # `workshop bench slice` prints these lines without the headline: the same word here
        line += _sample_note(res)
    return line


def _thread_lines(res: Mapping[str, Any]) -> list[str]:
    """This CPU's GEMM per core at the threads it has (never extrapolated), and the one thread-scaling range
    the planner prices a large AMX host with (chapter 01's)."""
    ts = res["thread_scaling"]
    here = ", ".join(f"{t}: {v:.2f}" for t, v in ts["per_core"].items())
    lines = [
        _("this CPU's GEMM per core by threads, over 1 thread (measured, not extrapolated): {here}").format(
            here=here
        )
    ]
    pl = ts.get("planner")
    if pl:
        lines.append(
            _("the planner's thread scaling for a large host (chapter 01's, the one range): {source}").format(
                source=pl["source"]
            )
        )
    elif "sentence" in ts:  # a slice.json from before the planner's range was stored with it
        lines.append(_("thread scaling of this CPU's GEMM: {sentence}").format(sentence=ts["sentence"]))
    return lines


def slice_headline(res: Mapping[str, Any]) -> str:
    """Chapter 04's one sentence on the slice: tokens/s per core on the real 8B shape with its spread, the
    planner's figure beside it, and the precision (fp32 where this CPU has no native bf16, and why)."""
    t, sh = res["tokens_per_s"], res["shape"]
    cores = sh["ranks"] * sh["threads"]
    line = _(
        "on the real 8B shape ({layers} layer(s), vocab {vocab:,}) this CPU trains {per:.1f} tokens/s per "
        "core ({lo:.1f}-{hi:.1f} over {n} steps, spread {spread:.0f}%); the planner said {pred:.1f} "
        "(measured / predicted = {ratio:.2f})"
    ).format(
        layers=sh["layers"], vocab=sh["vocab"], per=t["per_core"], lo=t["min"] / cores, hi=t["max"] / cores,
        n=t["n"], spread=t["spread_pct"], pred=res["prediction"]["tokens_per_s"] / cores,
        ratio=res["ratio_measured_over_predicted"],
    )  # fmt: skip
    line += _sample_note(res)
    if res["precision"] != "bf16":
        line += _("; in fp32: {why}").format(why=res["precision_why"])
    return line


def _sample_note(res: Mapping[str, Any]) -> str:
    """Whether the prediction beside a slice could have missed it: the planner's CPU rate is the compute
    share of a stored slice, so a slice of that shape on that CPU model checks only the repeat, one of
    another shape on that CPU model checks how the share carries to the shape, and only another CPU model
    checks the rate itself."""
    cal = res["prediction"].get("calibration")
    if not cal:
        return ""
    if cal.get("in_sample"):
        return _(" (in-sample: the planner's CPU rate comes from a slice of this shape on this CPU model)")
    if cal.get("cpu_model") == (res.get("machine") or {}).get("cpu_model"):
        return _(
            " (calibrated on this CPU model, out-of-sample in shape only: the planner's CPU rate comes from "
            "the stored slice of another shape on it ({shape}; {date}), so the ratio checks how that compute "
            "share carries to this shape, not the share itself)"
        ).format(shape=cal["shape"], date=cal["date"])
    return _(" (out-of-sample: the planner's CPU rate comes from a slice on {cpu}, {date})").format(
        cpu=cal["cpu_model"], date=cal["date"]
    )


def _term_lines(res: Mapping[str, Any]) -> list[str]:
    """The prediction term by term beside DeepSpeed's timers (rank 0), as time measured / predicted (above 1:
    slower than predicted). The timers put ZeRO-3's parameter gathers inside forward+backward, so compute
    and collectives apart are bounds; forward+backward, the optimizer and the whole step are exact."""
    split, p = res["step_split"], res["prediction"]
    if not split.get("measured"):
        return []
    fb, reduce, opt = (
        split["forward_backward_s"],
        split.get("allreduce_s") or 0.0,
        split["optimizer_s"] or 0.0,
    )
    step = res["step_s"]["median"]
    return [
        _(
            "time measured / predicted by term: forward+backward (compute with every collective inside) "
            "{fb:.2f} / {pfb:.2f} s = {rfb:.2f}; optimizer {opt:.2f} / {popt:.2f} s = {ropt:.2f}; the whole "
            "step {step:.2f} / {pstep:.2f} s = {rstep:.2f}"
        ).format(
            fb=fb, pfb=p["compute_s"] + p["comm_s"], rfb=fb / (p["compute_s"] + p["comm_s"]),
            opt=opt, popt=p["optimizer_s"], ropt=opt / p["optimizer_s"],
            step=step, pstep=p["step_s"], rstep=step / p["step_s"],
        ),
        _(
            "apart, as bounds: compute (forward+backward less the gradient reduce, the parameter gathers "
            "still inside) {c:.2f} / {pc:.2f} s = {rc:.2f} at most; collectives (the gradient reduce alone "
            "against all the predicted ones) {m:.2f} / {pm:.2f} s = {rm:.2f} at least"
        ).format(
            c=fb - reduce, pc=p["compute_s"], rc=(fb - reduce) / p["compute_s"],
            m=reduce, pm=p["comm_s"], rm=reduce / p["comm_s"],
        ),
    ]  # fmt: skip
