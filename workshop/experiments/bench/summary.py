"""The headline table: every stored benchmark result against its target (chapter 04, benchmarks/README.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from workshop.errors import (
    read_json,
)
from workshop.experiments.bench.config import BENCHMARKS, OWN_COMMAND
from workshop.experiments.bench.training import paired_verdict
from workshop.lang import N_, _
from workshop.paths import RESULTS_DIR
from workshop.report.interpret import measured_on
from workshop.report.plots import plot_bench_recipes
from workshop.tables import markdown_table

TARGETS = {
    "recipes": (N_("useful tokens/s, workbook / original workshop's recipe"), 20.0),
    "engine": (
        N_("useful tokens/s on the same packed blocks, workbook engine / original workshop's engine"),
        2.0,
    ),
    "mfu": (N_("model FLOPs utilization of the workbook recipe, % of AMX bf16 peak"), 10.0),
    "precision": (N_("step throughput, bf16 / fp32 (workbook recipe)"), 2.0),
    "gemm": (N_("best bf16 GEMM, % of AMX bf16 peak"), 40.0),
    "workbook": (N_("whole-workbook smoke run, minutes (at most)"), 10.0),
    "ceiling": (
        N_("training step model FLOP/s, % of the same cores' GEMM rate at the model's shapes (best lever)"),
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
    """Every benchmark JSON in the folder as a dict, by benchmark name (missing ones are simply absent)."""
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
    machine_recorded: NotRequired[bool]  # False: the result names no CPU (left out of the learner's table)
    verdict: str | None
    detail: str


Results = Mapping[str, Mapping[str, Any]]


def records_machine(result: Mapping[str, Any] | None) -> bool:
    """Whether a stored result names the CPU it was measured on (under any of the keys measured_on reads)."""
    if not result:
        return False
    env = {**(result.get("peaks") or {}), **(result.get("machine") or {}), **(result.get("env") or {})}
    return bool(
        env.get("cpu_model")
        or env.get("cpu")
        or result.get("cpu_model")
        or (result.get("detect") or {}).get("cpu_model")
        or (env.get("bf16") or {})
    )


def _row(res: Results, key: str, value, unit: str, *, judged=True, at_most=False, detail="") -> SummaryRow:
    """One target's row; measured_on: the result's machine (a training result's for a missing one)."""
    what, target = TARGETS[key]
    rec_any = next((res[k] for k in ("recipes", "engine", "precision") if res.get(k)), {})
    return {
        "benchmark": key,
        "metric": what,
        "value": None if value is None else round(value, 2),
        "unit": unit,
        "target": target,
        "measured_on": measured_on(res.get(key) or rec_any),
        "machine_recorded": records_machine(res.get(key) or rec_any),
        "verdict": _verdict(value, target, at_most=at_most, judged=judged),
        "detail": detail,
    }


def _training_row(res: Results, key: str) -> SummaryRow:
    r = res.get(key)
    if not r:
        return _row(res, key, None, "x")
    ratio = r["tokens_per_s_ratio"]
    va, vb = r["variants"][r["a"]], r["variants"][r["b"]]
    return _row(
        res,
        key,
        ratio["median"],
        "x",
        detail=_("{a:.0f} vs {b:.0f} tokens/s; paired ratios {low:.2f}-{high:.2f} over {n} rounds; ").format(
            a=va["tokens_per_s"]["median"],
            b=vb["tokens_per_s"]["median"],
            low=ratio["min"],
            high=ratio["max"],
            n=ratio["n"],
        )
        # judged now by today's rule from the runs it kept, never the sentence stored with them
        + (
            paired_verdict(r)
            if all(r["variants"][n].get("runs") for n in (r["a"], r["b"]))
            else _("verdict cannot be re-judged (no samples stored)")
        ),
    )


def _mfu_row(res: Results) -> SummaryRow:
    rec = res.get("recipes") or res.get("engine")
    if not rec:
        return _row(res, "mfu", None, "%")
    amx = any(r.get("peaks", {}).get("amx") for r in res.values() if isinstance(r, dict))
    w, pk = rec["variants"][rec["a"]], rec["peaks"]
    if pk.get("bf16_path") == "amx_bf16":  # an AMX CPU: one AMX peak, at the clock of the machine measured
        value, clock = w["mfu_pct_of_present_peak"], pk.get("clock_ghz")
        detail = _(
            "{tflops:.3f} model TFLOPS = {present}% of that CPU's AMX bf16 peak, {cores} cores x "
            "{clock:g} GHz (its reported clock) x 1,024 FLOP/cycle = {peak:.2f} TFLOPS"
        )
    else:
        value = w["mfu_pct_of_amx_peak"]
        clock = pk["amx_bf16_tflops"] * 1e3 / (pk["cores"] * 1024)  # the clock that AMX peak was taken at
        detail = _(
            "{tflops:.3f} model TFLOPS = {present}% of that CPU's {path} peak ({peak:.2f} TFLOPS), {amx}% of "
            "the AMX peak {cores} cores would have at {clock:.3g} GHz ({amx_peak:.2f} TFLOPS)"
        )
    return _row(
        res,
        "mfu",
        value,
        "%",
        judged=amx,
        detail=detail.format(
            tflops=w["model_tflops"],
            present=w["mfu_pct_of_present_peak"],
            path=pk["bf16_path"],
            peak=pk["bf16_tflops"],
            amx=w.get("mfu_pct_of_amx_peak"),
            cores=pk["cores"],
            clock=clock,
            amx_peak=pk["amx_bf16_tflops"],
        ),
    )


def _gemm_row(res: Results) -> SummaryRow:
    g = res.get("gemm")
    if not g:
        return _row(res, "gemm", None, "%")
    on_amx = g.get("peak_bf16_path") == "amx_bf16"  # one AMX peak: the measured machine's own clock
    return _row(
        res,
        "gemm",
        g["bf16_pct_of_peak"] if on_amx else g["bf16_pct_of_amx_peak"],
        "%",
        judged=g["amx"],
        detail=_(
            "bf16 {tflops:.3f} TFLOPS at n={n} = {pct}% of that CPU's {path} peak at {clock:g} GHz; "
            "bf16/fp32 GEMM x{ratio}"
        ).format(
            tflops=g["bf16_tflops"],
            n=g["bf16_size"],
            pct=g["bf16_pct_of_peak"],
            path=g["peak_bf16_path"],
            clock=g.get("clock_ghz") or 0,
            ratio=g["bf16_over_fp32"],
        ),
    )


def _workbook_row(res: Results) -> SummaryRow:
    wb = res.get("workbook")
    return _row(
        res,
        "workbook",
        wb["total_s"] / 60 if wb else None,
        "min",
        at_most=True,
        detail=_(
            "a stored run, not this one (each chapter states its own time at its end); {n} notebooks: {names}"
        ).format(n=len(wb["notebooks"]), names=", ".join(n["notebook"] for n in wb["notebooks"]))
        if wb
        else "",
    )


def _ceiling_row(res: Results, c: Mapping[str, Any]) -> SummaryRow:
    t, cfg = c["targets"]["step_pct_of_ceiling"], c["config"]
    return _row(
        res,
        "ceiling",
        t["best"],
        "%",
        detail=_(
            "{isa}; recipe {recipe:.1f}%, best lever {lever}; {model}, {nproc} ranks x {threads} threads"
        ).format(
            isa=c["isa_path"],
            recipe=t["recipe"],
            lever=t["best_lever"],
            model=cfg["model"],
            nproc=cfg["nproc"],
            threads=cfg["threads"],
        ),
    )


def _ipex_row(ip: Mapping[str, Any]) -> SummaryRow:
    return {
        "benchmark": "ipex",
        "metric": N_("IPEX / stock PyTorch, training step throughput"),
        "value": round(ip["ratio"]["median"], 2) if ip.get("status") == "ok" else None,
        "unit": "x",
        "target": None,
        "measured_on": measured_on(ip),
        "machine_recorded": records_machine(ip),
        "verdict": ip.get("status"),
        "detail": ip.get("message", ""),
    }


def summary_rows(results: Results | None = None, results_dir: str | Path = RESULTS_DIR) -> list[SummaryRow]:
    """The headline table: one row per target with the measured value (x for ratios, % for MFU and GEMM
    shares, minutes for the workbook), the target and a verdict; from `results` or `results_dir`'s JSON."""
    res = load_results(results_dir) if results is None else results
    rows = [_training_row(res, key) for key in ("recipes", "engine", "precision")]
    rows += [_mfu_row(res), _gemm_row(res), _workbook_row(res)]
    if res.get("ceiling"):
        rows.append(_ceiling_row(res, res["ceiling"]))
    if res.get("ipex"):
        rows.append(_ipex_row(res["ipex"]))
    return rows


def format_rows(rows: list[SummaryRow], *, targets: bool = False) -> str:
    """The stored benchmarks as a markdown table (text), each row with the machine it was measured on.

    Learners see measurements and where they were taken (a result that records no machine is left out);
    `targets=True` adds the project's goals and verdicts and keeps every row (benchmarks/README.md)."""
    columns = ["benchmark", "metric", "stored value", "detail", "stored: measured on"]
    lines: list[list[object]] = []
    for r in rows:
        if not targets and r["value"] is not None and not r.get("machine_recorded", True):
            continue  # a stored figure must say its machine: one that cannot is not shown to a learner
        value = "-" if r["value"] is None else f"{r['value']} {r['unit']}"
        metric = r["metric"]
        line: list[object] = [r["benchmark"], _(metric), value, r["detail"], r.get("measured_on", "-")]
        if targets:
            at = "<=" if r["benchmark"] == "workbook" else ">="
            line += ["-" if r["target"] is None else f"{at} {r['target']} {r['unit']}", r["verdict"]]
        lines.append(line)
    return markdown_table(columns + ["target", "verdict"] if targets else columns, lines)


def plot(results: Mapping[str, Mapping[str, Any]], images_dir: str | Path) -> list[Path]:
    """Chapter 04's bar chart of the training benchmarks' tokens/s (median, min-max): the PNGs written."""
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
