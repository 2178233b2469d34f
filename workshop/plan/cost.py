"""How long and how much: the time and cost of a fine-tune on each cluster that holds it, and what bounds each
step.

Why: the memory planner says what fits, not whether 24 cores finish in a day or a month, nor that a 4-node
gloo job spends most of its step waiting on one 5 Gbps TCP flow. The estimate per optimizer step is
compute (model FLOPs / effective rate) + exposed collectives (chapter 06's ZeRO bytes over the link each
crosses, plus latency per call) + offload copies + the optimizer step; every rate cites its source
(workshop.plan.rates), and the memory plan is the feasibility filter.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from workshop.errors import WorkshopError, check_choice, check_positive, report
from workshop.lang import _
from workshop.plan import rates
from workshop.plan.catalog import InstanceRow, instance_info, list_instances
from workshop.plan.memory import PlanOptions, Recommendation, fit_instance, plan_memory, recommend_instance
from workshop.plan.models import Architecture, architecture, flops_per_token
from workshop.plan.topology import GB, LINKS
from workshop.plan.traffic import Traffic, gathers_per_micro_step, step_time, zero_traffic
from workshop.plan.zero3 import Zero3Calls, Zero3Settings, zero3_calls

BOUNDS = ("compute", "network", "pcie/offload", "memory")
DEFAULT_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i", "p4d", "p4de", "p5", "g6e", "g5")
NODE_COUNTS = (1, 2, 4, 8)
MICRO_BATCHES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Node:
    """One node as the estimator sees it: what a rank computes at, and the links its collectives cross."""

    name: str
    device: str  # "cpu" or "gpu"
    max_ranks: int  # GPUs, or physical cores
    peak_tflops: float  # per GPU; for a CPU, the whole node (ranks share it)
    efficiency: rates.Rate  # fraction of peak a training step reaches
    mem_gbytes_per_s: float  # per GPU (HBM) or the whole node (DDR): the optimizer step
    host_mem_gbytes_per_s: float  # the host's DDR, for an offloaded optimizer
    intra_gbytes_per_s: float  # collective bandwidth between ranks of one node (effective)
    intra_latency: rates.Rate
    inter_gbytes_per_s: float  # collective bandwidth between nodes (effective, per node)
    inter_latency: rates.Rate
    inter_transport: str
    pcie_gbytes_per_s: float | None  # host <-> GPU, for offload copies
    overlap: rates.Rate
    usd_per_hour: rates.Rate | None
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """What is trained and how: the knobs a TrainJob sets."""

    nodes: int = 1
    procs_per_node: int = 1
    zero_stage: int = 3
    micro_batch: int = 1
    grad_accum: int = 4
    seq_len: int = 512
    grad_ckpt: bool = False
    offload_optimizer: bool = False
    offload_param: bool = False
    precision: str = "bf16"

    @property
    def world(self) -> int:
        return self.nodes * self.procs_per_node


@dataclass
class Plan:
    """One candidate, estimated: step terms, throughput, hours and dollars for the token budget, the bound."""

    instance_type: str
    device: str
    nodes: int
    procs_per_node: int
    zero_stage: int
    micro_batch: int
    grad_accum: int
    seq_len: int
    grad_ckpt: bool
    offload_optimizer: bool
    offload_param: bool
    precision: str
    threads_per_rank: int
    tokens: float
    tokens_per_s: float
    step_time_s: float
    compute_s: float
    comm_s: float  # exposed (after overlap): collectives + latency
    pcie_s: float
    optimizer_s: float
    gb_per_rank_per_step: float  # collective bytes each rank sends per optimizer step
    link_gbytes_per_s: float
    transport: str
    bound: str
    hours: float
    usd_per_hour: float | None
    usd: float | None
    usd_per_mtok: float | None
    sources: dict[str, str]
    hint: str = ""
    pareto: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.instance_type}"


# ---------------------------------------------------------------- nodes from the catalog


def _cpu_node(row: InstanceRow, opts: Options) -> Node:
    if not (row.amx and row.clock_ghz):
        raise WorkshopError(f"{row.instance_type}: the CPU estimate needs AMX and a clock ({row.amx_reason})")
    peak = row.amx_peak_tflops() or 0.0
    eff = opts.cpu_efficiency
    flow = rates.tcp_flow_gbps(opts.placement_group, opts.ena_express)
    nic = rates.instance_gbps(row)
    inter = min(nic, flow.value) * rates.TCP_EFFICIENCY.value / 8
    local_bw, local_lat = rates.gloo_local_fit()
    ddr = rates.DDR_GBYTES_PER_S_PER_CORE.value * row.cores
    return Node(
        name=row.instance_type,
        device="cpu",
        max_ranks=row.cores,
        peak_tflops=peak,
        efficiency=eff,
        mem_gbytes_per_s=ddr,
        host_mem_gbytes_per_s=ddr,
        intra_gbytes_per_s=local_bw.value,
        intra_latency=local_lat,
        inter_gbytes_per_s=inter,
        inter_latency=rates.LATENCY_S["tcp"],
        inter_transport=f"gloo over TCP: one flow per ring neighbour, min({nic:g} Gbps NIC, {flow.value:g} "
        "Gbps flow)",
        pcie_gbytes_per_s=None,
        overlap=rates.OVERLAP["cpu"],
        usd_per_hour=rates.price(row, opts.prices),
        sources={
            "peak": f"{row.cores} cores x {row.clock_ghz} GHz x 1,024 bf16 FLOP/cycle (AMX) = {peak:.1f} "
            "TFLOPS",
            "efficiency": eff.cite(),
            "network": f"{nic:g} Gbps (catalog NetworkPerformance); {flow.cite()}; x "
            f"{rates.TCP_EFFICIENCY.cite()}; "
            "never EFA: gloo has no EFA transport",
            "intra_node": local_bw.cite(),
            "memory": rates.DDR_GBYTES_PER_S_PER_CORE.cite(),
            "overlap": rates.OVERLAP["cpu"].cite(),
        },
    )


def _gpu_node(row: InstanceRow, opts: Options) -> Node:
    spec = rates.gpu_spec(row)
    intra_link = LINKS[rates.GPU_INTRA_LINK.get(row.family, "pcie4")]
    host_link = LINKS[rates.GPU_HOST_LINK.get(row.family, "pcie4")]
    if row.efa and row.max_efa_interfaces:
        inter = rates.efa_gbytes_per_s(row)
        transport = f"NCCL over EFA: {row.max_efa_interfaces} x 100 Gbps x {LINKS['efa'].efficiency:g}"
        latency = rates.LATENCY_S["efa"]
    else:
        inter = rates.instance_gbps(row) / 8 * LINKS["eni"].efficiency
        transport = (
            f"NCCL sockets over ENA (no EFA): {rates.instance_gbps(row):g} Gbps x {LINKS['eni'].efficiency:g}"
        )
        latency = rates.LATENCY_S["tcp"]
    return Node(
        name=row.instance_type,
        device="gpu",
        max_ranks=row.gpus,
        peak_tflops=spec.bf16_tflops,
        efficiency=opts.gpu_efficiency,
        mem_gbytes_per_s=spec.hbm_gbytes_per_s,
        host_mem_gbytes_per_s=rates.DDR_GBYTES_PER_S_PER_CORE.value * row.cores,
        intra_gbytes_per_s=intra_link.effective_gbytes_per_s,
        intra_latency=rates.LATENCY_S["nvlink"],
        inter_gbytes_per_s=inter,
        inter_latency=latency,
        inter_transport=transport,
        pcie_gbytes_per_s=host_link.effective_gbytes_per_s,
        overlap=rates.OVERLAP["gpu"],
        usd_per_hour=rates.price(row, opts.prices),
        sources={
            "peak": spec.source,
            "efficiency": opts.gpu_efficiency.cite(),
            "intra_node": f"{intra_link.name}: {intra_link.source} x {intra_link.efficiency:g}",
            "network": transport + f" ({LINKS['efa'].source})",
            "pcie": host_link.source,
            "overlap": rates.OVERLAP["gpu"].cite(),
        },
    )


def node_for(row: InstanceRow, opts: Options) -> Node:
    return _gpu_node(row, opts) if row.gpus else _cpu_node(row, opts)


# ---------------------------------------------------------------- the estimate


def collective_calls(arch: Architecture, job: Job) -> int:
    """Latency-paying calls per optimizer step when no call-level count (zero3_calls) is at hand: a ZeRO-3
    gather per layer per pass, gradients in DeepSpeed's reduce buckets."""
    if job.world == 1:
        return 0
    buckets = math.ceil(arch.params / Zero3Settings().reduce_bucket_size)
    if job.zero_stage == 3:
        return job.grad_accum * (gathers_per_micro_step(job.grad_ckpt) * arch.layers + buckets)
    if job.zero_stage == 2:
        return job.grad_accum * buckets + buckets
    return buckets * (2 if job.zero_stage == 1 else 1)


def job_traffic(arch: Architecture, job: Job, device: str) -> Traffic:
    """Chapter 06's model; gloo implements reduce-scatter as an all-reduce (chapter 06 measured 2x the
    bytes)."""
    return zero_traffic(
        arch.params,
        job.world,
        job.zero_stage,
        grad_accum=job.grad_accum,
        bytes_per_param=2,
        grad_ckpt=job.grad_ckpt,
        offload_param=job.offload_param,
        offload_optimizer=job.offload_optimizer,
        reduce_scatter_as_all_reduce=device == "cpu",
    )


def _bound(terms: dict[str, float]) -> str:
    return max(terms, key=lambda k: terms[k])


@lru_cache(maxsize=64)
def zero3_for(model: str, grad_accum: int, grad_ckpt: bool) -> Zero3Calls:
    """Chapter 06's call-level ZeRO-3 count for a preset (cached: it builds the model on the meta device)."""
    return zero3_calls(model, grad_accum=grad_accum, grad_ckpt=grad_ckpt)


def _zero3_traffic(traffic: Traffic, calls: Zero3Calls, job: Job, device: str) -> Traffic:
    """ZeRO-3 bytes from the call-level count (a model small enough keeps its forward gather for backward);
    gloo's reduce-scatter is an all-reduce (2x the bytes)."""
    t = calls.traffic(job.world, job.grad_accum)
    rs = t.reduce_scatter * (2 if device == "cpu" else 1)
    return replace(traffic, all_gather=t.all_gather, reduce_scatter=rs, gathers_per_micro=calls.gather_passes)


def estimate(
    node: Node, job: Job, arch: Architecture, tokens: float, *, calls: Zero3Calls | None = None
) -> Plan:
    """Time per optimizer step and everything derived from it, for `tokens` trained tokens. `calls`: the
    call-level ZeRO-3 count (zero3_for) for the same grad_accum and checkpointing, where the model is a
    preset."""
    check_positive("tokens", tokens)
    if job.procs_per_node > node.max_ranks:
        raise WorkshopError(f"{job.procs_per_node} ranks per node but {node.name} has {node.max_ranks}")
    tokens_rank = job.micro_batch * job.seq_len * job.grad_accum
    fpt = flops_per_token(
        arch.params,
        layers=arch.layers,
        hidden=arch.hidden,
        seq_len=job.seq_len,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
    ) * (4 / 3 if job.grad_ckpt else 1)  # checkpointing recomputes the forward pass
    per_rank_tflops = node.peak_tflops * node.efficiency.value
    if node.device == "cpu":
        per_rank_tflops /= job.procs_per_node  # ranks share the node's cores
    compute = tokens_rank * fpt / (per_rank_tflops * 1e12)
    traffic = job_traffic(arch, job, node.device)
    n_calls = collective_calls(arch, job)
    if calls is not None and job.zero_stage == 3 and job.world > 1:
        traffic = _zero3_traffic(traffic, calls, job, node.device)
        n_calls = sum(calls.n_ops.values())
    if job.nodes > 1:
        bw = (
            node.inter_gbytes_per_s
            if job.procs_per_node == 1
            else min(node.inter_gbytes_per_s, node.intra_gbytes_per_s)
        )
        latency, transport = node.inter_latency.value, node.inter_transport
    else:
        bw, latency = node.intra_gbytes_per_s, node.intra_latency.value
        transport = "none (one rank)" if job.world == 1 else f"inside one {node.name}"
    pcie_bw = node.pcie_gbytes_per_s if (job.offload_optimizer or job.offload_param) else None
    pred = step_time(
        traffic,
        collective_gbytes_per_s=bw,
        compute_s=compute,
        overlap=node.overlap.value,
        pcie_gbytes_per_s=pcie_bw,
    )
    hidden = 1 - node.overlap.value
    comm = hidden * (pred.collective_s + n_calls * latency)
    shard = arch.params / (job.world if job.zero_stage >= 1 else 1)
    opt_bw = node.host_mem_gbytes_per_s if job.offload_optimizer else node.mem_gbytes_per_s
    if node.device == "cpu" or job.offload_optimizer:
        opt_bw /= job.procs_per_node  # ranks of one node share its DDR
    optimizer = shard * rates.ADAM_BYTES_PER_PARAM.value / (opt_bw * GB)
    step = compute + comm + hidden * pred.pcie_s + optimizer
    tps = job.world * tokens_rank / step
    hours = tokens / tps / 3600
    usd_h = node.usd_per_hour.value * job.nodes if node.usd_per_hour else None
    usd = usd_h * hours if usd_h is not None else None
    terms = {"compute": compute, "network": comm, "pcie/offload": hidden * pred.pcie_s, "memory": optimizer}
    sources = {
        **node.sources,
        "flops": f"{fpt / 1e9:.1f} GFLOP/token: 6 x params + 12 x layers x hidden x seq"
        + (" x 4/3 (recompute)" if job.grad_ckpt else ""),
        "traffic": f"chapter 06's ZeRO-{job.zero_stage} model: {traffic.collective / GB:.1f} GB per rank per "
        "step",
        "optimizer": rates.ADAM_BYTES_PER_PARAM.cite(),
        "price": node.usd_per_hour.cite() if node.usd_per_hour else "unknown: pass --price TYPE=USD",
    }
    return Plan(
        instance_type=node.name,
        device=node.device,
        nodes=job.nodes,
        procs_per_node=job.procs_per_node,
        zero_stage=job.zero_stage,
        micro_batch=job.micro_batch,
        grad_accum=job.grad_accum,
        seq_len=job.seq_len,
        grad_ckpt=job.grad_ckpt,
        offload_optimizer=job.offload_optimizer,
        offload_param=job.offload_param,
        precision=job.precision,
        threads_per_rank=max(1, node.max_ranks // job.procs_per_node) if node.device == "cpu" else 1,
        tokens=tokens,
        tokens_per_s=tps,
        step_time_s=step,
        compute_s=compute,
        comm_s=comm,
        pcie_s=hidden * pred.pcie_s,
        optimizer_s=optimizer,
        gb_per_rank_per_step=traffic.collective / GB,
        link_gbytes_per_s=bw,
        transport=transport,
        bound=_bound(terms),
        hours=hours,
        usd_per_hour=usd_h,
        usd=usd,
        usd_per_mtok=usd / tokens * 1e6 if usd is not None else None,
        sources=sources,
    )


# ---------------------------------------------------------------- options and candidates


@dataclass
class Options:
    """Everything a ranking is asked for; the flags of `workshop plan`."""

    model: str = "llama-3-8b"
    tokens: float = 1e8
    families: Sequence[str] = DEFAULT_FAMILIES
    nodes: Sequence[int] = NODE_COUNTS
    procs_per_node: int | None = None  # default: 1 per CPU node, every GPU
    zero_stages: Sequence[int] = (3, 2, 1, 0)
    micro_batches: Sequence[int] = MICRO_BATCHES
    grad_accum: int = 4
    seq_len: int = 512
    grad_ckpt: Sequence[bool] = (False, True)
    headroom: float = 0.2
    placement_group: bool = False
    ena_express: bool = False
    cpu_efficiency: rates.Rate = field(default_factory=rates.cpu_efficiency)
    gpu_efficiency: rates.Rate = rates.GPU_MFU
    prices: dict[str, float] = field(default_factory=dict)
    max_hours: float | None = None
    budget: float | None = None
    source: str | None = None
    offload: bool = False  # also try GPU optimizer/parameter offload (estimates optimistic: see _offloads)


def _offloads(row: InstanceRow, stage: int, allow: bool) -> list[tuple[bool, bool]]:
    """GPU offload variants, only when asked: the estimator has no term for offload's host work (chapter 06's
    unfitted rows miss the original offloaded runs by 58-94%), so an offloaded plan would rank too well."""
    if not row.gpus or stage == 0 or not allow:
        return [(False, False)]
    return [(False, False), (True, False)] + ([(True, True)] if stage == 3 else [])


def _fits(row: InstanceRow, job: Job, opts: Options) -> bool:
    kw: PlanOptions = {
        "zero_stage": job.zero_stage,
        "offload_optimizer": job.offload_optimizer,
        "offload_param": job.offload_param,
        "micro_batch": job.micro_batch,
        "seq_len": job.seq_len,
        "grad_ckpt": job.grad_ckpt,
        "dtype": job.precision,
    }
    got, _why = fit_instance(
        row,
        model=opts.model,
        nodes=job.nodes,
        procs_per_node=job.procs_per_node,
        headroom=opts.headroom,
        plan_kw=kw,
    )
    return got is not None


def job_groups(row: InstanceRow, nodes: int, opts: Options) -> Iterable[list[Job]]:
    """Every job on `nodes` x `row` worth estimating, grouped by all but the micro-batch (ascending)."""
    ppn = opts.procs_per_node or (row.gpus if row.gpus else 1)
    world = nodes * ppn
    for stage in opts.zero_stages if world > 1 else (0,):
        for off_opt, off_par in _offloads(row, stage, opts.offload):
            for ckpt in opts.grad_ckpt:
                yield [
                    Job(nodes, ppn, stage, mb, opts.grad_accum, opts.seq_len, ckpt, off_opt, off_par)
                    for mb in sorted(opts.micro_batches)
                ]


def best_for(row: InstanceRow, nodes: int, opts: Options, arch: Architecture) -> Plan | None:
    """The cheapest (then fastest) job on `nodes` x `row` that fits in memory; None if none fits."""
    try:
        node = node_for(row, opts)
    except WorkshopError:
        return None
    best: Plan | None = None
    for group in job_groups(row, nodes, opts):
        for job in group:
            if job.procs_per_node > node.max_ranks or not _fits(row, job, opts):
                break  # a larger micro-batch needs more memory still
            plan = estimate(node, job, arch, opts.tokens, calls=_calls(opts.model, job))
            if best is None or _key(plan) < _key(best):
                best = plan
    return best


def _calls(model: str, job: Job) -> Zero3Calls | None:
    return zero3_for(model, job.grad_accum, job.grad_ckpt) if job.zero_stage == 3 and job.world > 1 else None


def _key(p: Plan) -> tuple[float, float]:
    return (p.usd if p.usd is not None else math.inf, p.hours)


def mark_pareto(plans: list[Plan]) -> None:
    """A plan is on the front when no other plan is both cheaper and faster."""
    for p in plans:
        p.pareto = p.usd is not None and not any(
            q is not p
            and q.usd is not None
            and q.usd <= p.usd
            and q.hours <= p.hours
            and (q.usd < p.usd or q.hours < p.hours)
            for q in plans
        )


def rank(opts: Options) -> list[Plan]:
    """Best plan per (instance type, node count) that fits, cheapest first, Pareto front marked, hinted."""
    _validate(opts)
    arch = architecture(opts.model)
    rows, _source = list_instances(list(opts.families), source=opts.source)
    rows = [r for r in rows if not r.bare_metal]  # a metal size is its 48xlarge/24xlarge twin, same price
    plans = [p for r in rows for n in opts.nodes if (p := best_for(r, n, opts, arch)) is not None]
    if not plans:
        raise WorkshopError(
            f"nothing fits: {opts.model} on {', '.join(opts.families)} x {list(opts.nodes)} node(s)"
        )
    plans.sort(key=_key)
    mark_pareto(plans)
    kept = filter_plans(plans, opts)
    for p in kept[:20]:
        p.hint = hint(p, opts, arch, rows)
    return kept


def dollars(usd: float | None) -> str:
    return f"${usd:,.0f}" if usd is not None else "an unknown price"


def filter_plans(plans: list[Plan], opts: Options) -> list[Plan]:
    """Keep the plans within --max-hours and --budget; none left is an error naming the fastest and
    cheapest."""
    kept = [
        p
        for p in plans
        if (opts.max_hours is None or p.hours <= opts.max_hours)
        and (opts.budget is None or (p.usd or math.inf) <= opts.budget)
    ]
    if not kept:
        fastest = min(plans, key=lambda p: p.hours)
        cheapest = plans[0]
        limits = " and ".join(
            f"--{flag} {value:g}"
            for flag, value in (("max-hours", opts.max_hours), ("budget", opts.budget))
            if value is not None
        )
        raise WorkshopError(
            f"nothing fits {limits}: the fastest plan "
            f"({fastest.label}) takes {fastest.hours:.3g} h for {dollars(fastest.usd)}, the cheapest "
            f"({cheapest.label}) {cheapest.hours:.3g} h for {dollars(cheapest.usd)}"
        )
    return kept


def evaluate(instance_type: str, nodes: int, opts: Options) -> Plan:
    """One instance type and node count: its best job, hinted."""
    _validate(opts)
    check_positive("nodes", nodes)
    arch = architecture(opts.model)
    row = instance_info(instance_type, source=opts.source)
    node_for(row, opts)  # an instance the estimator cannot model is an error here, not "nothing fits"
    plan = best_for(row, nodes, opts, arch)
    if plan is None:
        raise WorkshopError(
            f"nothing fits: {opts.model} on {nodes} x {instance_type} (memory plan, +{opts.headroom:.0%})"
        )
    plan.hint = hint(plan, opts, arch, [row])
    return plan


def _validate(opts: Options) -> None:
    check_positive("tokens", opts.tokens)
    for n in opts.nodes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise WorkshopError(f"nodes must be an integer >= 1, got {n!r}")
    for s in opts.zero_stages:
        check_choice("ZeRO stage", s, (0, 1, 2, 3))
    for mb in opts.micro_batches:
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
            raise WorkshopError(f"micro_batch must be an integer >= 1, got {mb!r}")
    if opts.procs_per_node is not None and opts.procs_per_node < 1:
        raise WorkshopError(f"procs_per_node must be an integer >= 1, got {opts.procs_per_node!r}")
    for what, v in (("max_hours", opts.max_hours), ("budget", opts.budget)):
        if v is not None:
            check_positive(what, v)
    plan_memory(opts.model, world_size=1, seq_len=opts.seq_len, micro_batch=1)  # model and seq_len


# ---------------------------------------------------------------- hints


def _variant(plan: Plan, opts: Options, arch: Architecture, row: InstanceRow, **change) -> Plan | None:
    job = Job(
        plan.nodes,
        plan.procs_per_node,
        plan.zero_stage,
        plan.micro_batch,
        plan.grad_accum,
        plan.seq_len,
        plan.grad_ckpt,
        plan.offload_optimizer,
        plan.offload_param,
    )
    node_opts = replace(opts, **{k: change.pop(k) for k in ("placement_group", "ena_express") if k in change})
    job = replace(job, **change)
    if job.procs_per_node > (row.gpus or row.cores) or not _fits(row, job, node_opts):
        return None
    return estimate(node_for(row, node_opts), job, arch, opts.tokens, calls=_calls(opts.model, job))


def hint(plan: Plan, opts: Options, arch: Architecture, rows: list[InstanceRow]) -> str:
    """The one change that helps this plan most, computed by re-estimating it (in the learner's language)."""
    row = next(r for r in rows if r.instance_type == plan.instance_type)
    if plan.usd is None:
        return _("{bound}-bound; no price known: --price {instance}=USD ranks it").format(
            bound=plan.bound, instance=plan.instance_type
        )
    usd = plan.usd
    if plan.nodes > 1:
        one = best_for(row, 1, opts, arch)
        if one and one.usd is not None and one.usd < usd:
            return _(
                "one node holds it: 1 x {instance} costs ${one_usd:,.0f} in {hours:.3g} h "
                "(no network in the step) instead of ${usd:,.0f}"
            ).format(instance=row.instance_type, one_usd=one.usd, hours=one.hours, usd=usd)
    if plan.bound == "network":
        more = _variant(plan, opts, arch, row, micro_batch=plan.micro_batch * 4)
        if more and more.usd:
            return _(
                "network-bound ({comm:.3g} s of {step:.3g} s): 4x the tokens per "
                "micro-step (micro-batch {micro_batch}) cuts the cost x{factor:.1f}"
            ).format(
                comm=plan.comm_s, step=plan.step_time_s, micro_batch=more.micro_batch, factor=usd / more.usd
            )
        if plan.device == "cpu" and not opts.ena_express:
            fast = _variant(plan, opts, arch, row, ena_express=True)
            if fast and fast.usd:
                return _(
                    "network-bound ({comm:.3g} s of {step:.3g} s per step): ENA Express "
                    "(25 Gbps per flow) cuts the cost x{factor:.1f}"
                ).format(comm=plan.comm_s, step=plan.step_time_s, factor=usd / fast.usd)
        return _("network-bound: {comm:.3g} s of {step:.3g} s per step is collectives").format(
            comm=plan.comm_s, step=plan.step_time_s
        )
    if plan.bound == "compute":
        more = _variant(plan, opts, arch, row, nodes=plan.nodes * 2)
        if more and more.usd:
            return _(
                "compute-bound ({compute:.3g} s of {step:.3g} s): 2x the nodes -> {hours:.3g} h for "
                "${usd:,.0f}"
            ).format(compute=plan.compute_s, step=plan.step_time_s, hours=more.hours, usd=more.usd)
        return _("compute-bound: {compute:.3g} s of {step:.3g} s per step is model FLOPs").format(
            compute=plan.compute_s, step=plan.step_time_s
        )
    if plan.bound == "memory":
        more = _variant(plan, opts, arch, row, grad_accum=plan.grad_accum * 4)
        if more and more.usd:
            return _("optimizer-bound: 4x gradient accumulation cuts the cost x{factor:.1f}").format(
                factor=usd / more.usd
            )
    off = _variant(plan, opts, arch, row, offload_param=False)
    if off and off.usd and plan.offload_param:
        return _("offload-bound: without parameter offload it costs ${usd:,.0f}").format(usd=off.usd)
    return _("{bound}-bound").format(bound=plan.bound)


def plan_options(plan: Plan) -> PlanOptions:
    """The memory planner's options for a plan's job."""
    return {
        "zero_stage": plan.zero_stage,
        "offload_optimizer": plan.offload_optimizer,
        "offload_param": plan.offload_param,
        "micro_batch": plan.micro_batch,
        "seq_len": plan.seq_len,
        "grad_ckpt": plan.grad_ckpt,
        "dtype": plan.precision,
    }


def recommendation(
    plan: Plan, model: str, *, headroom: float = 0.2, source: str | None = None
) -> Recommendation:
    """Pod requests, /dev/shm and threads for the plan's own instance type (chapter 05 renders its TrainJob
    from it)."""
    return recommend_instance(
        model,
        plan.instance_type,
        nodes=plan.nodes,
        procs_per_node=plan.procs_per_node,
        plan_kw=plan_options(plan),
        headroom=headroom,
        source=source,
    )


def train_settings(plan: Plan) -> dict[str, Any]:
    """The TrainArgs a TrainJob needs to run the plan's job (micro-batch, accumulation, ZeRO,
    checkpointing)."""
    return {
        "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        "seq_len": plan.seq_len,
        "zero_stage": plan.zero_stage,
        "grad_ckpt": plan.grad_ckpt,
        "offload_optimizer": plan.offload_optimizer,
        "offload_param": plan.offload_param,
    }


def within_margin(plans: Sequence[Plan], margin: float = 0.25) -> list[Plan]:
    """The plans costing at most (1 + margin) x the cheapest: what chapter 02's NodePool admits."""
    check_positive("margin", margin, allow_zero=True)
    priced = [p for p in plans if p.usd is not None]
    if not priced:
        raise WorkshopError("no priced plan to take a margin from")
    best = min(p.usd for p in priced if p.usd is not None)
    return [p for p in priced if p.usd is not None and p.usd <= best * (1 + margin)]


def pool_choice(plans: Sequence[Plan]) -> dict[str, Any]:
    """What karpenter.pool_from_recommendation reads: the plans' instance types and the most nodes any
    needs."""
    types = sorted({p.instance_type for p in plans})
    return {"instance_types": types, "instance_type": types[0], "nodes": max(p.nodes for p in plans)}


# ---------------------------------------------------------------- output


def format_table(plans: list[Plan], top: int | None = None) -> str:
    head = (
        f"{'#':>2} {'plan':<22} {'ranks':>5} {'ZeRO':>4} {'mb':>3} {'ckpt':>4} {'tok/s':>9} {'step s':>7} "
        f"{'comp s':>7} {'comm s':>7} {'bound':<8} {'hours':>9} {'USD':>10} {'$/Mtok':>8} P"
    )
    lines = [head, "-" * len(head)]
    for i, p in enumerate(plans[:top] if top else plans, 1):
        lines.append(
            f"{i:>2} {p.label:<22} {p.nodes * p.procs_per_node:>5} {p.zero_stage:>4} {p.micro_batch:>3} "
            f"{'yes' if p.grad_ckpt else 'no':>4} {p.tokens_per_s:>9,.0f} {p.step_time_s:>7.3g} "
            f"{p.compute_s:>7.3g} {p.comm_s:>7.3g} {p.bound:<8.8} {p.hours:>9.3g} "
            + (
                f"{p.usd:>10,.0f} {p.usd_per_mtok:>8.2f}"
                if p.usd is not None and p.usd_per_mtok is not None
                else f"{'?':>10} {'?':>8}"
            )
            + f" {'*' if p.pareto else ''}"
        )
    return "\n".join(lines)


def options_from_args(args: argparse.Namespace) -> Options:
    opts = Options(
        model=args.model,
        tokens=args.tokens,
        families=tuple(args.family or DEFAULT_FAMILIES),
        nodes=(args.nodes,) if args.nodes is not None else NODE_COUNTS,
        procs_per_node=args.procs_per_node,
        zero_stages=(args.zero,) if args.zero is not None else (3, 2, 1, 0),
        micro_batches=(args.micro_batch,) if args.micro_batch is not None else MICRO_BATCHES,
        grad_accum=args.grad_accum,
        seq_len=args.seq_len,
        grad_ckpt=(args.grad_ckpt,) if args.grad_ckpt is not None else (False, True),
        headroom=args.headroom,
        offload=args.offload,
        placement_group=args.placement_group,
        ena_express=args.ena_express,
        prices=rates.parse_prices(args.price),
        max_hours=args.max_hours,
        budget=args.budget,
        source=args.source,
    )
    if args.cpu_efficiency is not None:
        check_positive("--cpu-efficiency", args.cpu_efficiency)
        opts.cpu_efficiency = rates.Rate(
            args.cpu_efficiency, "of AMX bf16 peak", "override", "--cpu-efficiency"
        )
    if args.gpu_efficiency is not None:
        check_positive("--gpu-efficiency", args.gpu_efficiency)
        opts.gpu_efficiency = rates.Rate(
            args.gpu_efficiency, "of dense bf16 peak", "override", "--gpu-efficiency"
        )
    return opts


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workshop plan", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3-8b")
    p.add_argument("--tokens", type=float, default=1e8, help="tokens to train (default 1e8)")
    p.add_argument(
        "--family",
        action="append",
        metavar="GLOB",
        help=f"instance families (default {' '.join(DEFAULT_FAMILIES)})",
    )
    p.add_argument("--instance", help="evaluate one instance type (with --nodes)")
    p.add_argument("--nodes", type=int, default=None, help="node count (default: 1, 2, 4, 8)")
    p.add_argument(
        "--procs-per-node", type=int, default=None, help="ranks per node (default: 1 on CPU, every GPU)"
    )
    p.add_argument("--zero", type=int, default=None, help="ZeRO stage 0-3 (default: the cheapest that fits)")
    p.add_argument("--micro-batch", type=int, default=None, help="default: the cheapest of 1, 2, 4, 8, 16")
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None, help="default: either")
    p.add_argument("--headroom", type=float, default=0.2)
    p.add_argument("--max-hours", type=float, default=None)
    p.add_argument("--budget", type=float, default=None, help="USD")
    p.add_argument(
        "--placement-group", action="store_true", help="cluster placement group: 10 Gbps per TCP flow"
    )
    p.add_argument("--ena-express", action="store_true", help="ENA Express: 25 Gbps per TCP flow")
    p.add_argument(
        "--cpu-efficiency", type=float, default=None, help="fraction of AMX peak (default: measured)"
    )
    p.add_argument(
        "--gpu-efficiency", type=float, default=None, help="fraction of dense bf16 peak (default 0.5)"
    )
    p.add_argument("--price", action="append", metavar="TYPE=USD", help="override an hourly price")
    p.add_argument("--source", default=None, help="catalog source: auto, aws or moto")
    p.add_argument("--top", type=int, default=10, help="rows in the table (the JSON has every plan)")
    p.add_argument(
        "--offload",
        action="store_true",
        help="also try GPU offload (its host work is not modelled: optimistic)",
    )
    p.add_argument("--memory", action="store_true", help="the memory-only planner (workshop.plan.memory)")
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--memory" in argv:
        from workshop.plan import memory

        return memory.main([a for a in argv if a != "--memory"])
    args = _parser().parse_args(argv)
    try:
        opts = options_from_args(args)
        if args.instance:
            plans = [evaluate(args.instance, args.nodes or 1, opts)]
        else:
            plans = rank(opts)
    except WorkshopError as exc:
        return report(exc)
    if args.json:
        print(json.dumps({"plans": [p.to_dict() for p in plans]}, indent=2))
        return 0
    print(
        f"{opts.model}, {opts.tokens:.3g} tokens, seq {opts.seq_len}, grad-accum {opts.grad_accum}; "
        f"cheapest first, * = time-vs-cost Pareto front"
    )
    print(format_table(plans, args.top))
    for i, p in enumerate(plans[: args.top], 1):
        if p.hint:
            print(f"{i:>2} {p.label}: {p.hint}")
    unpriced = sorted({p.instance_type for p in plans if p.usd is None})
    if unpriced:
        print(
            f"no price known (listed last, never on the front): {', '.join(unpriced)}; --price TYPE=USD "
            "ranks them"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
