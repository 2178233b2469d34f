"""The model checked on this machine: 1-rank and N-rank ZeRO-3 runs with counted collectives, and chapter
05's rate-capped step times, each compared with what the calibrated model predicts.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from workshop.errors import WorkshopError
from workshop.experiments.comms.collectives import (
    CollectiveFit,
    NetsimBench,
    _torchrun,
    collective_time,
    loopback_bytes,
)
from workshop.experiments.comms.counting import per_step_calls
from workshop.lang import _
from workshop.plan.hardware import resolve_precision
from workshop.plan.localcheck import local_step
from workshop.plan.topology import parse_rate
from workshop.plan.zero3 import Zero3Calls, zero3_calls

# ---------------------------------------------------------------- local ZeRO-3 check


@dataclass
class LocalRun:
    model: str
    world: int
    offload: bool
    grad_ckpt: bool
    step_time_s: float
    optimizer_step_s: float  # time inside DeepSpeed's optimizer step (work that ZeRO splits N ways)
    calls: dict  # collective -> {"calls", "bytes"} per optimizer step, counted
    loopback_bytes_per_step_per_rank: float | None
    precision: str = "bf16"  # what the run trained in (precision "auto" decides per machine)

    @property
    def bytes_per_param(self) -> int:
        """ZeRO-3 gathers the 16-bit weights in bf16 and the fp32 weights in fp32: twice the bytes."""
        return 2 if self.precision == "bf16" else 4


def train_argv(
    model: str,
    *,
    offload: bool = False,
    grad_ckpt: bool = False,
    steps: int = 6,
    micro_batch: int = 4,
    seq_len: int = 128,
) -> list[str]:
    """The ZeRO-3 command this chapter measures (one thread per rank, so ranks do not fight for cores)."""
    args = [
        "--model",
        model,
        "--zero-stage",
        "3",
        "--max-steps",
        str(steps),
        "--micro-batch",
        str(micro_batch),
        "--seq-len",
        str(seq_len),
        "--threads",
        "1",
    ]
    if offload:
        args += ["--offload-optimizer", "--offload-param"]
    if grad_ckpt:
        args += ["--grad-ckpt"]
    return args


def run_training(
    model: str,
    *,
    world: int,
    offload: bool = False,
    grad_ckpt: bool = False,
    steps: int = 6,
    micro_batch: int = 4,
    seq_len: int = 128,
    out_dir: Path | None = None,
    prefix: list[str] | None = None,
) -> LocalRun:
    """One ZeRO-3 run of the lead's entry point with counted collectives: median step time (after the
    first), time in the optimizer step, collective calls and bytes per step, loopback bytes."""
    out = (
        Path(out_dir or tempfile.mkdtemp(prefix="comms-"))
        / f"{model}-w{world}-o{int(offload)}-c{int(grad_ckpt)}"
    )
    out.mkdir(parents=True, exist_ok=True)
    calls_path = out / "calls.json"
    args = [
        "-m",
        "workshop.experiments.comms",
        "_count",
        str(calls_path),
        *train_argv(
            model, offload=offload, grad_ckpt=grad_ckpt, steps=steps, micro_batch=micro_batch, seq_len=seq_len
        ),
        "--output-dir",
        str(out),
    ]
    lo0 = loopback_bytes()
    proc = _torchrun(args, nproc=world, prefix=prefix, env={"OMP_NUM_THREADS": "1"}, log_path=out / "log.txt")
    lo1 = loopback_bytes()
    metrics_path = out / "metrics.json"
    if proc.returncode != 0 or not metrics_path.exists() or not calls_path.exists():
        raise WorkshopError(f"training run failed (rc={proc.returncode}):\n{proc.stderr[-2000:]}")
    m = json.loads(metrics_path.read_text())
    times = [s["step_time_s"] for s in m["steps"][1:]] or [m["step_time_s_median"]]
    calls = per_step_calls(json.loads(calls_path.read_text())["snapshots"])
    opt = calls.pop("_step_s", {}).get("bytes", 0.0)
    lo = (lo1 - lo0) / steps / world if world > 1 and lo1 > lo0 else None
    return LocalRun(
        model,
        world,
        offload,
        grad_ckpt,
        statistics.median(times),
        opt,
        calls,
        lo,
        precision=m.get("args", {}).get("precision", "bf16"),
    )


class Prediction(TypedDict):
    """An N-rank ZeRO-3 step as the planner predicts it from the 1-rank step (seconds)."""

    compute_s: float
    comm_s: float
    optimizer_s: float
    predicted_s: float
    predicted_if_every_call_waits_s: float


def predict_from_single_rank(
    base: LocalRun, calls: Zero3Calls, fit: dict[str, CollectiveFit], world: int
) -> Prediction:
    """The planner's N-rank ZeRO-3 step (plan.localcheck.local_step, the one prediction chapter 01's table
    prints too): compute at the 1-rank step's rate without its optimizer, the collectives' bytes and calls
    (one latency per wave of calls launched together) at the all-gather fit, the optimizer from bytes over
    DDR; beside it the reading where every call pays a full latency."""
    p = local_step(
        base.model,
        base.step_time_s,
        base.optimizer_step_s,
        world=world,
        offload=base.offload,
        fit=fit["all_gather"],
        bytes_per_param=base.bytes_per_param,
    )
    every_call = fit["all_gather"]["alpha_s"] * (calls.all_gather_calls - calls.all_gather_waves)
    return {
        "compute_s": p.compute_s,
        "comm_s": p.comm_s,
        "optimizer_s": p.optimizer_s,
        "predicted_s": p.step_time_s,
        "predicted_if_every_call_waits_s": p.step_time_s + every_call,
    }


def stored_local(stored: Mapping[str, Any]) -> list[dict[str, Any]]:
    """comms.json's local runs with their prediction made again by today's planner (from each row's stored
    1-rank step and the stored collective fit), never the one stored beside them: chapter 06 and chapter 01
    then print one prediction for one measurement."""
    fit = stored["bench"]["fit"]
    rows = []
    for r in stored.get("local", []):
        base = LocalRun(
            r["model"], 1, r["offload"], False, r["base_1rank_s"], r["optimizer_1rank_s"], {}, None
        )
        calls = zero3_calls(r["model"], bytes_per_param=2)
        pred = predict_from_single_rank(base, calls, fit, r["world"])
        rows.append({**r, **pred, "error": pred["predicted_s"] / r["measured_s"] - 1})
    return rows


class LocalRow(Prediction):
    """One row of `local_comparison()` (comms.json "local"): chapter 06 prints model against measurement."""

    model: str
    params: int
    offload: bool
    world: int
    base_1rank_s: float
    optimizer_1rank_s: float
    measured_s: float
    error: float  # predicted / measured - 1
    all_gather_calls_model: int
    all_gather_calls_counted: float | None  # per optimizer step, median (None: not counted)
    all_gather_bytes_model: float
    all_gather_bytes_counted: float | None
    reduce_scatter_calls_model: int
    reduce_scatter_calls_counted: float | None
    counted: dict[str, dict[str, float]]  # collective -> {"calls", "bytes"} per step


def local_comparison(
    fit: dict[str, CollectiveFit],
    *,
    models=("tiny", "small"),
    offloads=(False, True),
    steps: int = 10,
    world: int = 2,
    out_dir: Path | None = None,
) -> list[LocalRow]:
    """Measure 1-rank and N-rank ZeRO-3 runs and compare the N-rank step with the model's prediction; returns
    one row per (model, offload): predicted_s and measured_s per step (s), error as a fraction (+0.1: 10%)."""
    rows: list[LocalRow] = []
    for model in models:
        for off in offloads:
            base = run_training(model, world=1, offload=off, steps=steps, out_dir=out_dir)
            run = run_training(model, world=world, offload=off, steps=steps, out_dir=out_dir)
            calls = zero3_calls(model, bytes_per_param=run.bytes_per_param)
            pred = predict_from_single_rank(base, calls, fit, world)
            counted = run.calls
            rows.append(
                {
                    "model": model,
                    "params": calls.params,
                    "offload": off,
                    "world": world,
                    "base_1rank_s": base.step_time_s,
                    "optimizer_1rank_s": base.optimizer_step_s,
                    **pred,
                    "measured_s": run.step_time_s,
                    "error": pred["predicted_s"] / run.step_time_s - 1,
                    "all_gather_calls_model": calls.all_gather_calls,
                    "all_gather_calls_counted": counted.get("all_gather_into_tensor", {}).get("calls"),
                    "all_gather_bytes_model": calls.all_gather_bytes,
                    "all_gather_bytes_counted": counted.get("all_gather_into_tensor", {}).get("bytes"),
                    "reduce_scatter_calls_model": calls.reduce_scatter_calls,
                    "reduce_scatter_calls_counted": counted.get("reduce_scatter_tensor", {}).get("calls"),
                    "counted": counted,
                }
            )
    return rows


class NetsimCheckRow(TypedDict):
    """One rate cap of `netsim_check()`: measured step against the calibrated and the line-rate prediction."""

    rate: str
    measured_s: float
    predicted_s: float
    error: float
    line_rate_predicted_s: float
    line_rate_error: float
    comm_s: float
    reference: bool  # the fastest cap, the one every prediction starts from


class NetsimCheck(TypedDict):
    mode: str | None
    model: str
    rows: list[NetsimCheckRow]


def netsim_check(bench: NetsimBench, netsim_result: dict, *, model: str = "tiny") -> NetsimCheck:
    """Chapter 05's namespace runs: predict the step at each cap from the step at the fastest cap, swapping
    only the collective time (calls x latency + bytes / bandwidth, both fitted at each cap), and compare with
    the prediction from the cap's line rate alone."""

    rows = {
        r["rate"]: r for r in netsim_result.get("table", []) if r.get("ok") and r.get("step_time_s_median")
    }
    rates = [r for r in bench["rates"] if r in rows]
    if len(rates) < 2:
        raise WorkshopError(
            f"need step times at two caps; netsim has {sorted(rows)}, bench has {sorted(bench['rates'])}"
        )
    rates.sort(key=lambda r: -(parse_rate(r) or math.inf))
    argv = netsim_result.get("train_args") or ["--precision", "bf16"]  # results from before "auto" were bf16
    asked = argv[argv.index("--precision") + 1] if "--precision" in argv else "auto"

    calls = zero3_calls(model, bytes_per_param=2 if resolve_precision(asked)[0] == "bf16" else 4)
    world = bench["rates"][rates[0]]["world"]
    tr = calls.traffic(world)
    ref = rates[0]
    comm = {r: collective_time(tr, bench["rates"][r]["fit"], n_ops=calls.n_ops) for r in rates}
    # an uncapped rate ("none": parse_rate gives None) has no line-rate time, as in the sort above
    line = {r: (tr.all_gather + 2 * tr.reduce_scatter) / ((parse_rate(r) or math.inf) / 8) for r in rates}
    out: list[NetsimCheckRow] = []
    for r in rates:
        measured = rows[r]["step_time_s_median"]
        calibrated = rows[ref]["step_time_s_median"] - comm[ref] + comm[r]
        naive = rows[ref]["step_time_s_median"] - line[ref] + line[r]
        out.append(
            {
                "rate": r,
                "measured_s": measured,
                "predicted_s": calibrated,
                "error": calibrated / measured - 1,
                "line_rate_predicted_s": naive,
                "line_rate_error": naive / measured - 1,
                "comm_s": comm[r],
                "reference": r == ref,
            }
        )
    return {"mode": bench.get("mode"), "model": model, "rows": out}


# ---------------------------------------------------------------- one fact: what offload does on a CPU


def offload_on_cpu(stored: dict | None = None, ceiling_path: str | Path | None = None) -> str:
    """What optimizer offload does on a CPU, with the runs that measured it (chapters 04 and 06 both print
    this, so they cannot disagree): no bytes cross a bus, the optimizer becomes DeepSpeed's fused CPU Adam."""
    from workshop.paths import RESULTS_DIR
    from workshop.report.interpret import measured_on

    if stored is None:
        path = RESULTS_DIR / "comms.json"
        stored = json.loads(path.read_text()) if path.is_file() else {}
    rows = {(r["model"], bool(r["offload"])): r["measured_s"] for r in (stored or {}).get("local", [])}
    pairs = [m for m in dict.fromkeys(k[0] for k in rows) if (m, True) in rows and (m, False) in rows]
    facts = "; ".join(
        _("{model}: {on:.2f} s per step with offload, {off:.2f} s without").format(
            model=m, on=rows[(m, True)], off=rows[(m, False)]
        )
        for m in pairs
    )
    out = _(
        "On a CPU the 'device' is host memory, so offload moves no bytes across a bus and saves no memory "
        "(it adds the fp32 gradient copy CPU Adam reads: 20 bytes per parameter instead of 16); what it "
        "changes is the optimizer: DeepSpeed's fused CPU Adam (one vectorised pass per partition) instead of "
        "torch's AdamW over the ZeRO partitions"
    )
    if facts:
        out += _(
            ". Stored ZeRO-3 runs, 2 ranks, one run per size and setting, medians over their steps, "
            "measured on {where}: {facts}: one run each, no verdict"
        ).format(where=measured_on(stored), facts=facts)
    lever = _cpu_adam_lever(ceiling_path)
    if lever:
        out += _(". The stored lever table, re-judged by today's rule: {said}").format(said=lever)
    return out + "."


def _cpu_adam_lever(path: str | Path | None) -> str | None:
    """The stored ceiling result's `ds_cpu_adam` lever (ZeRO-3 with DeepSpeed's CPU Adam against ZeRO-3 with
    torch's AdamW, interleaved rounds) as today's verdict.compare says it, with its machine and date."""
    from workshop.experiments import ceiling
    from workshop.paths import RESULTS_DIR
    from workshop.report.interpret import measured_on
    from workshop.report.verdict import rejudge

    path = Path(path) if path else RESULTS_DIR / "ceiling.json"
    if not path.is_file():
        return None
    res: dict[str, Any] = dict(ceiling.load(path))
    if (res.get("levers") or {}).get("ds_cpu_adam", {}).get("status") != "measured":
        return None
    word, cmp = rejudge(res, "ds_cpu_adam", measured_on(res))
    return cmp.sentence if cmp else _(word)


def _planner_beside(stored_rows: dict[str, float], where: str) -> list[str]:
    """Chapter 01's planner on the same stored namespace steps (plan.costcheck's rows), so chapter 06's
    prediction and chapter 01's of one measurement are read side by side, each with its method."""
    from workshop.plan.localcheck import netsim_predictions

    planned = netsim_predictions()
    if not planned or not stored_rows:
        return []
    return [
        _(
            "chapter 01's planner predicts the same stored steps ({where}) as {planned}: from its own terms "
            "(compute from a separate 1-rank session, the cap at its modelled TCP efficiency); the rows "
            "above start from the measured step at the fastest cap and swap in only the collectives fitted "
            "in the namespaces: two methods, so two predictions of one measurement"
        ).format(where=where, planned=", ".join(f"{rate} {s:.2f} s/step" for rate, s in planned.items()))
    ]


def _growth_line(rows: dict, live: dict, *, when: str, where: str, tolerance: float) -> list[str]:
    """Whether the stored slowdown under the tighter cap reproduced in this run: one run of each, so a
    growth within `tolerance` counts as the same, nothing finer."""
    both = [r for r in rows if r in live]
    if len(both) < 2:
        return []
    fast, slow = both[0], both[-1]
    here, then = live[slow] - live[fast], rows[slow] - rows[fast]
    same = abs(here / then - 1) <= tolerance if then else False
    return [
        (
            _(
                "{fast} -> {slow}: the step grew {here:.2f} s in chapter 05's run of {when} and {then:.2f} s "
                "in the stored one ({where}), one run of each: {verdict} (within {tol:.0%} of the stored "
                "growth counts as the same)"
            )
            if here >= 0
            else _(
                "{fast} -> {slow}: the step shrank {here:.2f} s in chapter 05's run of {when} and grew "
                "{then:.2f} s in the stored one ({where}), one run of each: {verdict} (within {tol:.0%} of "
                "the stored growth counts as the same)"
            )
        ).format(
            when=when,
            where=where,
            fast=fast,
            slow=slow,
            here=abs(here),
            then=then,
            verdict=_("the same growth as the stored run")
            if same
            else _(
                "NOT the stored growth: read the stored explanation below as that machine's, not this one's"
            ),
            tol=tolerance,
        )
    ]


def netsim_reproduced(
    stored: dict, live_path: str | Path | None = None, *, tolerance: float = 0.2
) -> list[str]:
    """Chapter 05's rate-capped step times from THIS run (its report JSON, when chapter 05 ran) beside the
    stored ones chapter 06's model was checked against, and whether the stored slowdown under the tighter cap
    reproduced here (within `tolerance` of its growth in seconds): a stored number never stands in for this
    run's."""
    from workshop.report.interpret import measured_on

    rows = {r["rate"]: r["measured_s"] for r in (stored.get("netsim") or {}).get("rows", [])}
    where = measured_on(stored)
    path = Path(live_path) if live_path else None
    if not path or not path.is_file():
        return [
            _(
                "stored ({where}): {rows}; chapter 05 has not run here, so there is nothing of this run "
                "to set beside them"
            ).format(where=where, rows=", ".join(f"{k} {v:.2f} s/step" for k, v in rows.items()) or "-")
        ]
    # the report's own time: an output folder keeps chapter 05's result from an earlier workbook run
    when = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    live = {
        r["rate"]: r["step_time_s_median"]
        for r in json.loads(path.read_text()).get("table", [])
        if r.get("ok") and r.get("step_time_s_median")
    }
    out = [
        _("{rate}: chapter 05's run of {when} {live}, stored {stored} ({where})").format(
            rate=rate,
            when=when,
            live=f"{live[rate]:.2f} s/step" if rate in live else "-",
            stored=f"{rows[rate]:.2f} s/step" if rate in rows else "-",
            where=where,
        )
        for rate in dict.fromkeys([*rows, *live])
    ]
    out += _growth_line(rows, live, when=when, where=where, tolerance=tolerance)
    out += _planner_beside(rows, where)
    return out
