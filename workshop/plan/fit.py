"""The instance type that holds a memory plan: what a pod can request on a node (Karpenter's and the EKS AMI's
reserves), whether a type fits, and the smallest one with its pod requests (chapter 01's `recommend`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from workshop.errors import WorkshopError, check_positive
from workshop.lang import _
from workshop.plan.catalog import (
    DAEMONSET_VCPUS,
    PRICE_SOURCE,
    InstanceRow,
    allocatable,
    instance_info,
    list_instances,
)
from workshop.plan.memory import (
    DEFAULT_ACTIVATIONS,
    HEADROOM,
    GiB,
    MemoryPlan,
    PlanOptions,
    check_count,
    plan_memory,
)
from workshop.plan.models import SEQ_LEN

# A CPU pod's cores, once: what it requests, the threads its ranks run and the cores the planner prices are
# one number (pod_cores), so a pod never runs more threads than it holds nor is priced on cores it lacks.


def vcpus_per_core(row: InstanceRow) -> int:
    """Hardware threads per physical core (2 on the Xeon families: SMT)."""
    return max(1, row.vcpus // max(1, row.cores))


def pod_cores(row: InstanceRow) -> int:
    """Whole physical cores a CPU pod holds on this type: every allocatable vCPU but the daemonsets', in
    whole cores (both hyperthreads of each: the kubelet's static CPU manager gives a Guaranteed pod whole
    cores). The pod requests them, its ranks run one thread on each, and the planner prices them."""
    _gib, vcpus = allocatable(row)
    return max(1, (math.floor(vcpus) - DAEMONSET_VCPUS) // vcpus_per_core(row))


def pod_cpu_request(row: InstanceRow) -> int:
    """The pod's cpu request (and limit) in vCPUs: its whole cores, both hyperthreads each."""
    return pod_cores(row) * vcpus_per_core(row)


def threads_per_rank(row: InstanceRow, procs_per_node: int) -> int:
    """Threads each of a node's ranks runs: the pod's cores shared out, one thread per core."""
    return max(1, pod_cores(row) // procs_per_node)


def _pow2_gib(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1))))


@dataclass
class Recommendation:
    """What to ask Karpenter and the TrainJob for. hourly_cost_usd is for all nodes (None if unknown)."""

    model: str
    instance_type: str
    nodes: int
    procs_per_node: int
    cpu_request: str
    memory_request: str
    shm_size: str
    hourly_cost_usd: float | None
    node_hourly_usd: float | None
    reason: str
    instance_types: list[str]
    family: str
    device: str
    gpus_per_node: int
    threads_per_rank: int
    need_per_node_gib: float
    allocatable_gib: float
    headroom: float
    plan: MemoryPlan
    price_source: str = ""
    constraints: list[str] = field(default_factory=list)  # every rule that decided the pick, in words

    def as_dict(self) -> dict:
        d = asdict(self)
        d["plan"] = self.plan.as_dict()
        return d


class _Fit(TypedDict):
    """What `fit_instance` found for an instance type that holds the plan."""

    plan: MemoryPlan
    ppn: int
    host_need: float  # GiB per node, headroom included
    mem_alloc: float
    cpu_alloc: float


def fit_instance(
    row: InstanceRow,
    *,
    model: str,
    nodes: int,
    procs_per_node: int | None,
    headroom: float,
    plan_kw: PlanOptions,
) -> tuple[_Fit | None, str]:
    """Does `row` hold the plan? -> (details, '') or (None, why not)."""
    gpu = row.gpus > 0
    ppn = procs_per_node or (row.gpus if gpu else 1)
    if gpu and ppn > row.gpus:
        return None, _("{ppn} ranks per node but {instance} has {gpus} GPU(s)").format(
            ppn=ppn, instance=row.instance_type, gpus=row.gpus
        )
    if not gpu and ppn > pod_cores(row):
        return None, _("{ppn} ranks per node but a pod holds only {cores} physical cores").format(
            ppn=ppn, cores=pod_cores(row)
        )
    plan = plan_memory(
        model, world_size=nodes * ppn, procs_per_node=ppn, device="gpu" if gpu else "cpu", **plan_kw
    )
    mem_alloc, cpu_alloc = allocatable(row)
    host_need = plan.host_total / GiB * (1 + headroom)
    if gpu:
        dev_need = plan.device_bytes / GiB * (1 + headroom)
        if dev_need > row.gpu_memory_gib:
            return None, _("{need:.1f} GiB per GPU with headroom > {have:.0f} GiB ({gpu})").format(
                need=dev_need, have=row.gpu_memory_gib, gpu=row.gpu_name
            )
    if math.ceil(host_need) > mem_alloc:  # the pod requests whole GiB (_recommendation)
        return None, _("needs {need:.0f} GiB host memory with headroom > {alloc:.0f} GiB allocatable").format(
            need=host_need, alloc=mem_alloc
        )
    return {
        "plan": plan,
        "ppn": ppn,
        "host_need": host_need,
        "mem_alloc": mem_alloc,
        "cpu_alloc": cpu_alloc,
    }, ""


def _fits_on(
    rows: list[InstanceRow],
    nodes: int,
    need_efa: bool,
    why_not: dict[str, str],
    **fit_kw: Any,
) -> list[tuple[InstanceRow, _Fit]]:
    """The rows that hold the plan on `nodes` nodes, smallest first; why each other one does not, in
    `why_not`."""
    fits = []
    for r in rows:
        if need_efa and not r.efa:
            why_not[r.instance_type] = _("no EFA (needed between nodes)")
            continue
        got, why = fit_instance(r, nodes=nodes, **fit_kw)
        if got:
            fits.append((r, got))
        else:
            why_not[r.instance_type] = why
    fits.sort(key=lambda f: (f[0].gpus, f[0].memory_gib, f[0].vcpus, f[0].bare_metal))
    return fits


def _nothing_fits(
    model: str, rows: list[InstanceRow], why_not: dict[str, str], zero_stage: int, nodes: int | None, families
) -> WorkshopError:
    """Why no instance type holds the plan: the largest candidate's reason, and what to try."""
    biggest = max(rows, key=lambda r: (r.memory_gib, r.gpus), default=None)
    detail = (
        _("; largest candidate {instance}: {why}").format(
            instance=biggest.instance_type, why=why_not.get(biggest.instance_type)
        )
        if biggest
        else ""
    )
    gpu = any(r.gpus for r in rows)
    # offload moves state from GPU memory to the host; on a CPU node everything is host memory already, and
    # offloading only adds CPU Adam's fp32 gradient copy
    opts = (
        _(
            "more nodes, --offload-optimizer/--offload-param, gradient checkpointing, a smaller "
            "micro-batch, or a larger family"
        )
        if gpu
        else _("more nodes, gradient checkpointing, a smaller micro-batch, or a larger family")
    )
    return WorkshopError(
        _(
            "nothing fits: {model} with ZeRO-{zero} on {nodes} node(s) of {families}{detail}. Try {options}."
        ).format(
            model=model,
            zero=zero_stage,
            nodes=nodes or _("up to 32"),
            families=", ".join(families),
            detail=detail,
            options=opts,
        )
    )


def recommend(
    model: str,
    *,
    nodes: int | None = None,
    procs_per_node: int | None = None,
    families=("c7i", "m7i", "r7i"),
    zero_stage: int = 3,
    offload_optimizer: bool = False,
    offload_param: bool = False,
    micro_batch: int = 1,
    seq_len: int = SEQ_LEN,
    grad_ckpt: bool = False,
    dtype: str = "bf16",
    headroom: float = HEADROOM,
    efa: bool | None = None,
    source: str | None = None,
    activations: str = DEFAULT_ACTIVATIONS,
    method: str = "full",
) -> Recommendation:
    """The smallest instance type (then node count, if `nodes` is None) of `families` that fits with headroom.

    Returns a Recommendation: instance type, nodes, pod requests (cpu, memory in Gi, /dev/shm), $/h for
    all nodes, the memory plan (bytes per rank) and every rule that decided the pick. CPU families: one pod
    per node holds `procs_per_node` ranks (default 1) in host memory. GPU families: one rank per GPU
    (default: all of them), device memory per GPU and offloaded state in host memory. EFA is required for
    multi-node plans unless `efa=False`. Nothing fits -> WorkshopError saying why.
    """
    if nodes is not None:
        check_count("nodes", nodes)
    if procs_per_node is not None:
        check_count("procs_per_node", procs_per_node)
    check_positive("headroom", headroom, allow_zero=True)
    # validates the model and the options before any catalog query
    plan_kw = plan_memory(
        model,
        world_size=1,
        zero_stage=zero_stage,
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
        micro_batch=micro_batch,
        seq_len=seq_len,
        grad_ckpt=grad_ckpt,
        dtype=dtype,
        activations=activations,
        method=method,
    ).options()
    families = [families] if isinstance(families, str) else list(families)
    rows, _source = list_instances(families, source=source)
    why_not: dict[str, str] = {}
    kw = {"model": model, "procs_per_node": procs_per_node, "headroom": headroom, "plan_kw": plan_kw}
    for n in [nodes] if nodes else [1, 2, 4, 8, 16, 32]:
        need_efa = (n > 1) if efa is None else efa
        fits = _fits_on(rows, n, need_efa, why_not, **kw)
        if fits:
            best, got = fits[0]
            rec = _recommendation(model, best, got, n, fits, headroom, PRICE_SOURCE)
            rec.constraints = _constraints(rec, rows, need_efa, efa, families, nodes=n, source=source, **kw)
            rec.reason = " ".join([rec.reason, *rec.constraints])
            return rec
    raise _nothing_fits(model, rows, why_not, zero_stage, nodes, families)


def recommend_instance(
    model: str,
    instance_type: str,
    *,
    nodes: int,
    procs_per_node: int,
    plan_kw: PlanOptions,
    headroom: float = HEADROOM,
    source: str | None = None,
) -> Recommendation:
    """The pod sizes for one named instance type (the cost planner's pick), or why it does not hold the
    plan."""
    row = instance_info(instance_type, source=source)
    got = fit_named(row, model, nodes, procs_per_node, plan_kw, headroom)
    return _recommendation(model, row, got, nodes, [(row, got)], headroom, PRICE_SOURCE)


def fit_named(
    row: InstanceRow, model: str, nodes: int, procs_per_node: int, plan_kw: PlanOptions, headroom: float
) -> _Fit:
    """fit_instance for a type already picked: its fit, or one error saying why it does not hold the plan."""
    got, why = fit_instance(
        row, model=model, nodes=nodes, procs_per_node=procs_per_node, headroom=headroom, plan_kw=plan_kw
    )
    if got is None:
        raise WorkshopError(f"{model} on {nodes} x {row.instance_type}: {why}")
    return got


class PodSizes(TypedDict):
    """A pod's requests: whole vCPUs, memory and /dev/shm in Gi."""

    cpu_request: str
    memory_request: str
    shm_size: str


def pod_sizes(row: InstanceRow, got: _Fit) -> PodSizes:
    """The pod's requests on `row` for a fit: memory rounded up to whole GiB, the pod's whole cores
    (pod_cpu_request; a GPU pod: what the daemonsets leave), /dev/shm a quarter of the memory, <= 64Gi."""
    mem_req = math.ceil(got["host_need"])
    cpu_req = pod_cpu_request(row) if not row.gpus else max(1, math.floor(got["cpu_alloc"]) - DAEMONSET_VCPUS)
    shm = min(64, _pow2_gib(mem_req / 4))
    return PodSizes(cpu_request=str(cpu_req), memory_request=f"{mem_req}Gi", shm_size=f"{shm}Gi")


def _constraints(rec, rows, need_efa, efa, families, **kw) -> list[str]:
    """The rules besides memory that decided the pick, each with what it costs (EFA above all: in the Xeon
    families only the 48xlarge and metal sizes have it, so a multi-node plan jumps to the largest size)."""
    out = []
    if need_efa:
        with_efa = sorted({r.instance_type.split(".")[1] for r in rows if r.efa})
        out.append(
            _("Multi-node needs EFA, which in {families} only the {sizes} size(s) offer.").format(
                families="/".join(families), sizes=", ".join(with_efa)
            )
            if with_efa
            else _("Multi-node needs EFA, which no size in {families} offers.").format(
                families="/".join(families)
            )
        )
        if efa is None:
            try:
                alt = recommend(
                    kw["model"],
                    nodes=kw["nodes"],
                    procs_per_node=kw["procs_per_node"],
                    families=families,
                    headroom=kw["headroom"],
                    efa=False,
                    source=kw["source"],
                    **kw["plan_kw"],
                )
            except WorkshopError:
                alt = None
            if alt and alt.instance_type != rec.instance_type:
                cost = (
                    _(" at ${usd:.2f}/h").format(usd=alt.hourly_cost_usd)
                    if alt.hourly_cost_usd is not None
                    else ""
                )
                mine = (
                    f"${rec.hourly_cost_usd:.2f}/h"
                    if rec.hourly_cost_usd is not None
                    else _("an unknown price")
                )
                out.append(
                    _(
                        "Without EFA (efa=False, `--no-efa`): {nodes} x {instance}{cost} instead of {mine}, "
                        "with collectives over plain ENI TCP (chapter 06 models the cost)."
                    ).format(nodes=alt.nodes, instance=alt.instance_type, cost=cost, mine=mine)
                )
    elif efa is False and rec.nodes > 1:
        out.append(_("EFA not required (efa=False): collectives between nodes run over plain ENI TCP."))
    if rec.device == "cpu":
        out.append(_pod_cores_sentence(rec, kw["source"]))
    return out


def _pod_cores_sentence(rec: Recommendation, source: str | None) -> str:
    """A CPU pod's cores, derived in words beside their numbers (pod_cores: request, threads and rate)."""
    row = instance_info(rec.instance_type, source=source)
    return _(
        "One pod per node: cpu {cpu} = {cores} whole cores ({alloc:.2f} allocatable vCPUs, less "
        "{spare} for the daemonsets, in whole cores of {per_core} vCPUs), {ranks} rank(s) x "
        "{threads} thread(s), one per core; the planner prices these {cores} cores, not the node's "
        "{node_cores}."
    ).format(
        cpu=rec.cpu_request,
        alloc=allocatable(row)[1],
        cores=pod_cores(row),
        spare=DAEMONSET_VCPUS,
        per_core=vcpus_per_core(row),
        ranks=rec.procs_per_node,
        threads=rec.threads_per_rank,
        node_cores=row.cores,
    )


def _reason(
    row: InstanceRow, got: _Fit, nodes: int, fits: list[tuple[InstanceRow, _Fit]], headroom: float
) -> str:
    """Why this type: what one node holds (per GPU and host, GiB, headroom included) within what it allows."""
    plan = got["plan"]
    where = (
        _("{per_gpu:.1f} GiB per GPU of {gpu_gib:.0f} and ").format(
            per_gpu=plan.device_bytes / GiB, gpu_gib=row.gpu_memory_gib
        )
        if row.gpus > 0
        else ""
    )
    return _(
        "{instance} is the smallest {families} type that holds {ppn} rank(s) x {per_rank:.1f} GiB ({where}"
        "{host:.1f} GiB host per node, +{headroom:.0%} headroom = {request} GiB) within {alloc:.0f} GiB "
        "allocatable; {nodes} node(s), world size {world}."
    ).format(
        instance=row.instance_type,
        families="/".join(sorted({f[0].family for f in fits})),
        ppn=got["ppn"],
        per_rank=plan.total / GiB,
        where=where,
        host=plan.host_total / GiB,
        headroom=headroom,
        request=math.ceil(got["host_need"]),
        alloc=got["mem_alloc"],
        nodes=nodes,
        world=plan.world_size,
    )


def _recommendation(
    model: str,
    row: InstanceRow,
    got: _Fit,
    nodes: int,
    fits: list[tuple[InstanceRow, _Fit]],
    headroom: float,
    price_source: str,
) -> Recommendation:
    """The pod requests for `row` (pod_sizes), with the reason and the memory plan."""
    plan, ppn = got["plan"], got["ppn"]
    gpu = row.gpus > 0
    price = row.hourly_usd
    reason = _reason(row, got, nodes, fits, headroom)
    return Recommendation(
        model=model,
        instance_type=row.instance_type,
        nodes=nodes,
        procs_per_node=ppn,
        **pod_sizes(row, got),
        hourly_cost_usd=round(price * nodes, 4) if price is not None else None,
        node_hourly_usd=price,
        reason=reason,
        instance_types=[f[0].instance_type for f in fits],
        family=row.family,
        device="gpu" if gpu else "cpu",
        gpus_per_node=row.gpus,
        threads_per_rank=threads_per_rank(row, ppn) if not gpu else max(1, row.cores // ppn),
        need_per_node_gib=round(got["host_need"], 2),
        allocatable_gib=round(got["mem_alloc"], 2),
        headroom=headroom,
        plan=plan,
        price_source=price_source,
    )
