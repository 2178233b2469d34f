"""The cost planner checked against this machine's own runs (plan.costcheck's first rows): chapter 04's local
2-rank ZeRO-3 steps and chapter 05's runs across network namespaces under a tc cap, every stored run a row, a
miss set beside the other runs of the same job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workshop.errors import WorkshopError
from workshop.lang import _
from workshop.plan import rates
from workshop.plan.costcheck import LOCAL_TARGET, NETSIM_DATE, CheckRow
from workshop.plan.estimate import Candidate, Plan, estimate, zero3_for
from workshop.plan.models import Architecture, architecture
from workshop.plan.nodes import Node
from workshop.plan.zero3 import zero3_calls


def _local_node(
    step_tflops: float, ranks: int, inter_gbps: float | None, fit: Mapping[str, Any] | None = None
) -> Node:
    """This 2-core box: compute at its measured 1-rank step rate, collectives at chapter 06's gloo fit (one
    host; `fit`: a fresh all-gather fit, else the stored one) or over a capped link (chapter 05's namespaces).
    """
    bw, alpha = rates.gloo_local_fit()
    if fit is not None:  # this run's benchmark (chapter 06 with run_local)
        where = "this run's gloo all-gather fit"
        bw = rates.Rate(fit["gbytes_per_s"], "GB/s", "measured", where)
        alpha = rates.Rate(fit["alpha_s"], "s per collective call", "measured", where)
    measured = rates.Rate(
        1.0, "of the measured step rate", "measured", "comms.json 1-rank step on this machine"
    )
    inter = (inter_gbps or 1.0) * rates.TCP_EFFICIENCY.value / 8
    return Node(
        name="this machine",
        device="cpu",
        max_ranks=ranks,
        peak_tflops=ranks * step_tflops,  # one thread per rank, each at the measured 1-rank rate
        efficiency=measured,
        mem_gbytes_per_s=2 * rates.DDR_GBYTES_PER_S_PER_CORE.value,
        host_mem_gbytes_per_s=2 * rates.DDR_GBYTES_PER_S_PER_CORE.value,
        intra_gbytes_per_s=bw.value,
        intra_latency=alpha,
        inter_gbytes_per_s=inter,
        inter_latency=rates.LATENCY_S["tcp"],
        inter_transport=f"gloo over TCP capped at {inter_gbps} Gbit/s",
        pcie_gbytes_per_s=None,
        overlap=rates.OVERLAP["cpu"],
        usd_per_hour=None,
    )


def _step_rate(arch: Architecture, run: dict, seq_len: int, micro_batch: int) -> float:
    """TFLOPS of the measured 1-rank step without its optimizer (comms.json)."""
    fpt = arch.train_flops(seq_len)
    return micro_batch * seq_len * fpt / (run["base_1rank_s"] - run["optimizer_1rank_s"]) / 1e12


# netsim.json records neither machine nor date: the commit that stored it does (f4ede4b, 2026-11-22), on the
# machine comms.json names for the same day.
NETSIM_MEASURED = f"stored {NETSIM_DATE} (commit f4ede4b), the 2-core machine of comms.json"


def _machine(doc: dict) -> str:
    env = doc.get("env", {})
    return f"{env.get('cpu_model', '?')} ({env.get('isa_class', '?')}, {env.get('cpus', '?')} CPUs)"


# A later run of the same namespace job (chapter 05's defaults are that job), stored with its machine and
# date: the stored 2026-11-22 gap is judged against it, not left as the only word.
NETSIM_REPEAT = "netsim-2026-11-28.json"


def _netsim_runs() -> list[tuple[dict, str, str]]:
    """Every stored namespace run: (result, its date, where it was measured), oldest first."""
    runs = [(rates.read_measured("netsim.json"), NETSIM_DATE, "netsim.json, " + NETSIM_MEASURED)]
    try:
        again = rates.read_measured(NETSIM_REPEAT)
    except WorkshopError:  # not stored (an older checkout): the first run stands alone
        return runs
    env = again.get("env", {})
    return [
        *runs,
        (again, env.get("date", "?"), f"{NETSIM_REPEAT}, stored {env.get('date', '?')}, {_machine(again)}"),
    ]


def local_rows() -> list[CheckRow]:
    """Chapter 04's local 2-rank ZeRO-3 steps (tiny, small) and chapter 05's 10 vs 1 Gbit namespace runs
    (every stored run): predicted beside measured seconds per step."""
    comms = rates.read_measured("comms.json")
    runs = {r["model"]: r for r in comms["local"] if not r["offload"]}
    return _local_step_rows(comms, runs) + _netsim_rows(_netsim_runs(), runs)


def netsim_predictions() -> dict[str, float]:
    """The planner's seconds per step for the first stored namespace run's caps (chapter 06 prints them beside
    its own prediction of the same steps), by cap."""
    comms = rates.read_measured("comms.json")
    runs = {r["model"]: r for r in comms["local"] if not r["offload"]}
    first = _netsim_runs()[:1]
    return {r.check.split(" at ")[1].split(",")[0]: r.predicted for r in _netsim_rows(first, runs)}


def local_step(
    model: str,
    base_1rank_s: float,
    optimizer_1rank_s: float,
    *,
    world: int = 2,
    offload: bool = False,
    fit: Mapping[str, Any] | None = None,
    bytes_per_param: int = 2,
) -> Plan:
    """The planner's N-rank ZeRO-3 step of chapter 04's recipe (micro-batch 4 x 128 tokens per rank, one
    thread each) on one host: compute at the 1-rank run's measured rate without its optimizer, collectives at
    the gloo all-gather fit (`bytes_per_param` 4 for a run in fp32), the optimizer from bytes over DDR. The
    one prediction of these steps: chapter 01's table and chapter 06 both print it."""
    arch = architecture(model)
    run = {"base_1rank_s": base_1rank_s, "optimizer_1rank_s": optimizer_1rank_s}
    job = Candidate.measured(
        nodes=1,
        procs_per_node=world,
        zero_stage=3,
        micro_batch=4,
        grad_accum=1,
        seq_len=128,
        offload_optimizer=offload,
    )
    node = _local_node(_step_rate(arch, run, 128, 4), world, None, fit)
    # an fp32 run gathers fp32 weights: twice the bytes of the bf16 count the planner caches
    calls = zero3_for(model, 1, False) if bytes_per_param == 2 else zero3_calls(model, bytes_per_param=4)
    return estimate(node, job, arch, 1e6, calls=calls)


def _local_step_rows(comms: dict, runs: dict[str, dict]) -> list[CheckRow]:
    """2 ranks on this machine, compute at its measured 1-rank rate."""
    rows: list[CheckRow] = []
    for model in ("tiny", "small"):
        arch, run = architecture(model), runs[model]
        rate = _step_rate(arch, run, 128, 4)
        p = local_step(model, run["base_1rank_s"], run["optimizer_1rank_s"])
        rows.append(
            CheckRow(
                f"ch04 local 2-rank ZeRO-3 step, {model}",
                p.step_time_s,
                run["measured_s"],
                "s/step",
                LOCAL_TARGET,
                f"comms.json 'local', measured {comms['date']} on {_machine(comms)}; compute at that "
                f"machine's 1-rank rate {rate:.3f} TFLOPS",
                _(
                    "comm {comm:.3f} s (gloo fit {link:.2f} GB/s) + optimizer {optimizer:.3f} s + compute "
                    "{compute:.3f} s; a miss is the 2-rank slowdown of 2 ranks on 2 shared cores"
                ).format(
                    comm=p.comm_s, link=p.link_gbytes_per_s, optimizer=p.optimizer_s, compute=p.compute_s
                ),
            )
        )
    return rows


def _netsim_caps(netsim: dict, rate: float) -> list[tuple[dict, Any]]:
    """One stored namespace run's caps, each with the planner's estimate, fastest predicted first."""
    tiny = architecture("tiny")
    caps = [
        (
            res,
            estimate(
                _local_node(rate, 1, int(res["rate"].removesuffix("gbit"))),
                Candidate.measured(2, 1, 3, 4, 1, 128),
                tiny,
                1e6,
                calls=zero3_for("tiny", 1, False),
            ),
        )
        for res in netsim["table"]
        if res.get("ok") and res.get("step_time_s_median")
    ]
    return sorted(caps, key=lambda c: c[1].step_time_s)


def _netsim_cause(p, date: str, gap_m: float, gap_p: float, others: str) -> str:
    """One netsim row's cause: the network term, and the slow-vs-fast gap (grown or shrunk) beside the
    planner's."""
    return (
        _(
            "network term: {mb:.0f} MB at {link:.3f} GB/s = {comm:.3f} s; in the run of "
            "{when} the step grew {gap_m:.3f} s from the fast cap to the slow one against "
            "{gap_p:.3f} s predicted{others}; compute {compute:.3f} s is from a separate "
            "1-rank session"
        )
        if gap_m >= 0
        else _(
            "network term: {mb:.0f} MB at {link:.3f} GB/s = {comm:.3f} s; in the run of "
            "{when} the step shrank {gap_m:.3f} s from the fast cap to the slow one where it "
            "was predicted to grow {gap_p:.3f} s{others}; compute {compute:.3f} s is from a "
            "separate 1-rank session"
        )
    ).format(
        mb=p.gb_per_rank_per_step * 1e3,
        link=p.link_gbytes_per_s,
        comm=p.comm_s,
        when=date,
        gap_m=abs(gap_m),
        gap_p=gap_p,
        others=f" ({others})" if others else "",
        compute=p.compute_s,
    )


def _netsim_rows(stored: list[tuple[dict, str, str]], runs: dict[str, dict]) -> list[CheckRow]:
    """2 nodes x 1 rank as network namespaces under a tc rate cap, fast and slow, for every stored run; each
    row's cause sets its run's slow-vs-fast gap beside the planner's and beside the other stored runs'."""
    rate = _step_rate(architecture("tiny"), runs["tiny"], 128, 4)
    gaps = []  # (date, measured gap, predicted gap) per stored run
    per_run = []
    for netsim, date, where in stored:
        caps = _netsim_caps(netsim, rate)
        (m_fast, p_fast), (m_slow, p_slow) = caps[0], caps[-1]
        gaps.append(
            (
                date,
                m_slow["step_time_s_median"] - m_fast["step_time_s_median"],
                p_slow.step_time_s - p_fast.step_time_s,
            )
        )
        per_run.append((caps, date, where))
    rows: list[CheckRow] = []
    for (caps, date, where), (_d, gap_m, gap_p) in zip(per_run, gaps, strict=True):
        others = "; ".join(
            (
                _("the stored run of {when} grew {gap:.3f} s")
                if g >= 0
                else _("the stored run of {when} shrank {gap:.3f} s")
            ).format(when=d, gap=abs(g))
            for d, g, _p in gaps
            if d != date
        )
        for res, p in caps:
            rows.append(
                CheckRow(
                    f"ch05 netsim 2 nodes x 1 rank at {res['rate']}, tiny ({date})",
                    p.step_time_s,
                    res["step_time_s_median"],
                    "s/step",
                    LOCAL_TARGET,
                    "network namespaces, tc cap: " + where,
                    _netsim_cause(p, date, gap_m, gap_p, others),
                )
            )
    return rows
