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
from workshop.plan.models import Architecture, architecture, flops_per_token, get_preset
from workshop.plan.topology import GB, LINKS
from workshop.plan.traffic import Traffic, gathers_per_micro_step, step_time, zero_traffic
from workshop.plan.zero3 import Zero3Calls, Zero3Settings, zero3_calls

BOUNDS = ("compute", "network", "pcie/offload", "memory")
DEFAULT_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i", "p4d", "p4de", "p5", "p5en", "g6e", "g5")
NODE_COUNTS = (1, 2, 4, 8)
MICRO_BATCHES = (1, 2, 4, 8, 16)
# The fine-tune's own optimizer step: the original workshop's 4 ranks x micro-batch 1 x 4 accumulation steps
# x 512 tokens (models.FINETUNE). Every plan trains this global batch, so every plan is the same fine-tune.
DEFAULT_GLOBAL_BATCH = 4 * 1 * 4 * 512
PLANNER_ERROR = 0.35  # the planner's stated +/-35% target: plans closer in cost than this are ties
STATE_BYTES_PER_PARAM = 14  # a checkpoint: bf16 weights + fp32 master, Adam m and v
STACKS = tuple(rates.GPU_STACKS)
CPU_ENGINES = tuple(rates.CPU_ENGINES)
STORAGES = ("fsx", "s3")
# The stack the memory filter models: a tuned stack (flash attention, selective recompute, tensor parallel)
# fits configurations this one does not.
MEMORY_STACK = (
    "memory plan of the workbook's stack: HF transformers eager attention activations + DeepSpeed ZeRO, "
    "full recompute when checkpointing"
)


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

    @property
    def tokens_per_step(self) -> int:
        """The global batch: tokens per optimizer step over every rank."""
        return self.world * self.micro_batch * self.grad_accum * self.seq_len


@dataclass(frozen=True)
class FixedCosts:
    """What a run pays besides its training steps, each a stated assumption with a flag; billed per node."""

    startup_s: rates.Rate = field(default_factory=rates.startup_s)
    download_gbytes_per_s: rates.Rate = rates.DOWNLOAD_GBYTES_PER_S
    init_s: rates.Rate = rates.INIT_S
    checkpoint_minutes: float = rates.CHECKPOINT_MINUTES
    storage: str = "fsx"
    storage_gbytes_per_s: rates.Rate | None = None  # default: the storage's own (rates.STORAGE)

    def write_rate(self) -> rates.Rate:
        return self.storage_gbytes_per_s or rates.STORAGE[self.storage].gbytes_per_s

    def terms(self, arch: Architecture, train_s: float) -> dict[str, float]:
        """Seconds of the run besides its steps: start-up, download, init, checkpoints, final save."""
        write = self.write_rate().value
        weights_gb = arch.params * 2 / GB
        states_gb = arch.params * STATE_BYTES_PER_PARAM / GB
        every = self.checkpoint_minutes * 60
        n_ckpt = int(train_s // every) if every > 0 else 0
        return {
            "startup": self.startup_s.value,
            "download": weights_gb / self.download_gbytes_per_s.value,
            "init": self.init_s.value,
            "checkpoints": n_ckpt * states_gb / write,
            "final save": weights_gb / write,
        }

    def storage_usd(self, arch: Architecture, hours: float) -> float:
        """The storage the run writes to, for the run's hours (FSx bills its whole capacity)."""
        spec = rates.STORAGE[self.storage]
        gb = max(spec.min_gb, arch.params * (STATE_BYTES_PER_PARAM + 2) / GB)
        return gb * spec.usd_per_gb_month.value * hours / 730

    def cite(self) -> dict[str, str]:
        return {
            "startup": self.startup_s.cite(),
            "download": self.download_gbytes_per_s.cite(),
            "init": self.init_s.cite(),
            "checkpoints": f"every {self.checkpoint_minutes:g} min of training, {STATE_BYTES_PER_PARAM} "
            f"B/param of states to {self.storage} at {self.write_rate().cite()}",
            "storage": rates.STORAGE[self.storage].usd_per_gb_month.cite(),
        }


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
    tokens_per_step: int = 0
    steps: int = 0
    train_hours: float = 0.0
    fixed_s: dict[str, float] = field(default_factory=dict)  # start-up, download, init, checkpoints, save
    fixed_usd: float | None = (
        None  # paid once: start-up, download, init, final save (not checkpoints, storage)
    )
    price_kind: str = ""  # "price", "override"
    save_steps: int = 0  # the TrainJob's checkpoint interval in steps
    hint: str = ""
    pareto: bool = False
    tie: bool = False  # within PLANNER_ERROR of the best plan's cost

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.instance_type}"


# ---------------------------------------------------------------- nodes from the catalog


def _cpu_node(row: InstanceRow, opts: Options) -> Node:
    if not (row.amx and row.clock_ghz):
        raise WorkshopError(f"{row.instance_type}: the CPU estimate needs AMX and a clock ({row.amx_reason})")
    clock = rates.cpu_clock_basis(opts.ceiling)
    peak = row.cores * clock.value * 1024 / 1000  # on the measuring host's clock: the rate's own basis
    eff = opts.cpu_efficiency or rates.cpu_efficiency(opts.cpu_engine, opts.ceiling)
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
            "peak": f"{row.cores} cores x {clock.value:g} GHz x 1,024 bf16 FLOP/cycle (AMX) = {peak:.1f} "
            f"TFLOPS, at {clock.cite()} (the catalog's {row.clock_ghz} GHz is not used: "
            "the measured share is of this clock)",
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
    eff = opts.gpu_efficiency or rates.GPU_STACKS[opts.stack]
    if opts.gpu_efficiency is None and opts.stack == "tuned-fp8" and spec.name not in rates.FP8_GPUS:
        eff = rates.GPU_STACKS["tuned-bf16"]  # no FP8 tensor cores: the same stack in bf16
    intra_link = LINKS[rates.GPU_INTRA_LINK.get(row.family, "pcie4")]
    host_link = LINKS[rates.GPU_HOST_LINK.get(row.family, "pcie4")]
    if row.efa and row.max_efa_interfaces:
        inter = rates.efa_gbytes_per_s(row)
        transport = (
            f"NCCL over EFA: {row.max_efa_interfaces} devices, {rates.instance_gbps(row):g} Gbps "
            f"({row.network_performance}) x {LINKS['efa'].efficiency:g}"
        )
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
        efficiency=eff,
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
            "efficiency": f"{opts.stack}: {eff.cite()}",
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
    node: Node,
    job: Job,
    arch: Architecture,
    tokens: float,
    *,
    calls: Zero3Calls | None = None,
    fixed: FixedCosts | None = None,
) -> Plan:
    """Time per optimizer step and everything derived from it, for `tokens` trained tokens. `calls`: the
    call-level ZeRO-3 count (zero3_for) for the same grad_accum and checkpointing, where the model is a
    preset. `fixed`: the run's costs besides its steps (none: the steps alone, as costcheck compares)."""
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
    steps = math.ceil(tokens / job.tokens_per_step)
    train_s = steps * step
    fixed_terms = fixed.terms(arch, train_s) if fixed else {}
    hours = (train_s + sum(fixed_terms.values())) / 3600
    usd_h = node.usd_per_hour.value * job.nodes if node.usd_per_hour else None
    storage_usd = fixed.storage_usd(arch, hours) if fixed else 0.0
    usd = usd_h * hours + storage_usd if usd_h is not None else None
    once = sum(v for k, v in fixed_terms.items() if k != "checkpoints")  # paid once, whatever the budget
    fixed_usd = usd_h * once / 3600 if usd_h is not None else None
    every = fixed.checkpoint_minutes * 60 if fixed else 0.0
    terms = {"compute": compute, "network": comm, "pcie/offload": hidden * pred.pcie_s, "memory": optimizer}
    sources = {
        **node.sources,
        "flops": f"{fpt / 1e9:.1f} GFLOP/token: 6 x params + 12 x layers x hidden x seq"
        + (" x 4/3 (recompute)" if job.grad_ckpt else ""),
        "traffic": f"chapter 06's ZeRO-{job.zero_stage} model: {traffic.collective / GB:.1f} GB per rank per "
        "step",
        "optimizer": rates.ADAM_BYTES_PER_PARAM.cite(),
        "price": node.usd_per_hour.cite() if node.usd_per_hour else "unknown: pass --price TYPE=USD",
        **(fixed.cite() if fixed else {}),
        "memory plan": MEMORY_STACK,
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
        tokens_per_step=job.tokens_per_step,
        steps=steps,
        train_hours=train_s / 3600,
        fixed_s=fixed_terms,
        fixed_usd=fixed_usd,
        price_kind=node.usd_per_hour.kind if node.usd_per_hour else "",
        save_steps=max(1, round(every / step)) if every > 0 else 0,
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
    global_batch: int = DEFAULT_GLOBAL_BATCH  # tokens per optimizer step, the same for every plan
    seq_len: int = 512
    grad_ckpt: Sequence[bool] = (False, True)
    headroom: float = 0.2
    placement_group: bool = False
    ena_express: bool = False
    stack: str = "hf-deepspeed-bf16"  # the GPU software stack and precision (rates.GPU_STACKS)
    cpu_engine: str = "deepspeed"  # the CPU job's engine: its measured rate (rates.CPU_ENGINES)
    cpu_efficiency: rates.Rate | None = None  # default: measured for cpu_engine
    ceiling: str | None = None  # a ceiling.json measured on this machine (calibrate), else the stored one
    gpu_efficiency: rates.Rate | None = None  # default: the stack's
    fixed: FixedCosts = field(default_factory=FixedCosts)
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


def split_batch(
    global_batch: int, seq_len: int, world: int, micro_batches: Sequence[int]
) -> list[tuple[int, int]]:
    """(micro_batch, grad_accum) pairs that make exactly `global_batch` tokens per step on `world` ranks."""
    seqs, rest = divmod(global_batch, seq_len * world)
    if rest or seqs < 1:
        return []
    return [(mb, seqs // mb) for mb in sorted(micro_batches) if seqs % mb == 0]


def batch_reason(opts: Options, world: int) -> str:
    """Why `world` ranks cannot train the job's global batch."""
    seqs = opts.global_batch / opts.seq_len
    return (
        f"the global batch of {opts.global_batch:,} tokens is {seqs:g} sequences of {opts.seq_len}: it does "
        f"not split evenly over {world} ranks with a micro-batch in {sorted(opts.micro_batches)} "
        "(--global-batch changes the fine-tune)"
    )


def job_groups(row: InstanceRow, nodes: int, opts: Options) -> Iterable[list[Job]]:
    """Every job on `nodes` x `row` that trains the global batch, grouped by all but the micro-batch
    (ascending)."""
    ppn = opts.procs_per_node or (row.gpus if row.gpus else 1)
    world = nodes * ppn
    splits = split_batch(opts.global_batch, opts.seq_len, world, opts.micro_batches)
    for stage in opts.zero_stages if world > 1 else (0,):
        for off_opt, off_par in _offloads(row, stage, opts.offload):
            for ckpt in opts.grad_ckpt:
                yield [
                    Job(nodes, ppn, stage, mb, ga, opts.seq_len, ckpt, off_opt, off_par) for mb, ga in splits
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
            plan = estimate(node, job, arch, opts.tokens, calls=_calls(opts.model, job), fixed=opts.fixed)
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


def mark_ties(plans: list[Plan], error: float = PLANNER_ERROR) -> list[Plan]:
    """Plans within the planner's error of the cheapest are ties, ordered by the stated rule: fewer nodes,
    then less time; the rest follow, cheapest first. `plans` must be sorted by cost."""
    priced = [p for p in plans if p.usd is not None]
    if not priced:
        return plans
    best = priced[0].usd or 0.0
    for p in priced:
        p.tie = (p.usd or math.inf) <= best * (1 + error)
    ties = sorted((p for p in plans if p.tie), key=lambda p: (p.nodes, p.hours))
    return ties + [p for p in plans if not p.tie]


def rank(opts: Options) -> list[Plan]:
    """Best plan per (instance type, node count) that fits, cheapest first with ties ordered by fewer nodes
    then less time, Pareto front marked, hinted."""
    _validate(opts)
    arch = architecture(opts.model)
    rows, _source = list_instances(list(opts.families), source=opts.source)
    rows = [r for r in rows if not r.bare_metal]  # a metal size is its 48xlarge/24xlarge twin, same price
    plans = [p for r in rows for n in opts.nodes if (p := best_for(r, n, opts, arch)) is not None]
    if not plans:
        raise WorkshopError(_nothing_fits(rows, opts))
    plans.sort(key=_key)
    mark_pareto(plans)
    kept = mark_ties(filter_plans(plans, opts))
    for p in kept[:20]:
        p.hint = hint(p, opts, arch, rows)
    return kept


def _nothing_fits(rows: list[InstanceRow], opts: Options) -> str:
    """Why no plan came out: no data sheet or rate, the global batch, or memory."""
    where = f"{opts.model} on {', '.join(opts.families)} x {list(opts.nodes)} node(s)"
    if not rows:
        return f"nothing fits: the catalog lists no instance type for {', '.join(opts.families)}"
    why = []
    for r in rows[:3]:
        try:
            node_for(r, opts)
        except WorkshopError as exc:
            why.append(str(exc))
    if len(why) == min(3, len(rows)):
        return f"no plan for {where}: {why[0]}"
    ppn = opts.procs_per_node or (rows[0].gpus or 1)
    if all(not split_batch(opts.global_batch, opts.seq_len, n * ppn, opts.micro_batches) for n in opts.nodes):
        return f"no plan for {where}: {batch_reason(opts, min(opts.nodes) * ppn)}"
    return f"nothing fits in memory: {where} ({MEMORY_STACK}, +{opts.headroom:.0%} headroom)"


def at_budget(plans: Sequence[Plan], tokens: float, opts: Options) -> list[Plan]:
    """The same jobs re-costed for another token budget (steps, checkpoints and storage scale; start-up,
    download, init and the final save do not), re-ranked with ties: how the answer moves with the budget."""
    _check_range("tokens", tokens, 0, 1e13, low_open=True)
    arch = architecture(opts.model)
    out = []
    for p in plans:
        steps = math.ceil(tokens / p.tokens_per_step)
        train_s = steps * p.step_time_s
        terms = opts.fixed.terms(arch, train_s)
        hours = (train_s + sum(terms.values())) / 3600
        once = sum(v for k, v in terms.items() if k != "checkpoints")
        usd = None
        if p.usd_per_hour is not None:
            usd = p.usd_per_hour * hours + opts.fixed.storage_usd(arch, hours)
        fixed_usd = p.usd_per_hour * once / 3600 if p.usd_per_hour is not None else None
        out.append(
            replace(
                p,
                tokens=tokens,
                steps=steps,
                train_hours=train_s / 3600,
                fixed_s=terms,
                hours=hours,
                usd=usd,
                fixed_usd=fixed_usd,
                usd_per_mtok=usd / tokens * 1e6 if usd is not None else None,
                tie=False,
                hint="",
            )
        )
    out.sort(key=_key)
    return mark_ties(out)


def budget_lines(plans: Sequence[Plan], budgets: Sequence[float], opts: Options) -> list[str]:
    """One line per token budget: the first plan, its time and cost, and the share paid once."""
    lines = []
    for tokens in budgets:
        first = at_budget(plans, tokens, opts)[0]
        share = (first.fixed_usd or 0.0) / first.usd if first.usd else 0.0
        lines.append(
            _(
                "{tokens:.0e} tokens ({steps:,} steps): {label}, {hours:.3g} h, ${usd:,.0f}, of which "
                "{share:.0%} is paid once (start-up, download, init, final save)"
            ).format(
                tokens=tokens,
                steps=first.steps,
                label=first.label,
                hours=first.hours,
                usd=first.usd or 0.0,
                share=share,
            )
        )
    return lines


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
    """One instance type and node count: its best job, hinted; why not, when none."""
    _validate(opts)
    check_positive("nodes", nodes)
    arch = architecture(opts.model)
    row = instance_info(instance_type, source=opts.source)
    node = node_for(row, opts)  # an instance the estimator cannot model is an error here, not "nothing fits"
    ppn = (opts.procs_per_node or node.max_ranks) if row.gpus else (opts.procs_per_node or 1)
    if ppn > node.max_ranks:
        unit = "GPUs" if row.gpus else "cores"
        raise WorkshopError(
            f"--procs-per-node {ppn}: {instance_type} has {node.max_ranks} {unit} (one rank per GPU or core "
            f"at most)"
        )
    if not split_batch(opts.global_batch, opts.seq_len, nodes * ppn, opts.micro_batches):
        raise WorkshopError(f"no plan on {nodes} x {instance_type}: {batch_reason(opts, nodes * ppn)}")
    plan = best_for(row, nodes, opts, arch)
    if plan is None:
        raise WorkshopError(
            f"nothing fits in memory: {opts.model} on {nodes} x {instance_type} ({MEMORY_STACK}, "
            f"+{opts.headroom:.0%} headroom)"
        )
    plan.hint = hint(plan, opts, arch, [row])
    return plan


def _check_range(what: str, value: float | None, low: float, high: float, *, low_open: bool = False) -> None:
    """One line naming the bad value and the allowed range (also refuses nan and inf)."""
    if value is None:
        return
    ok = isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high
    if ok and low_open and value == low:
        ok = False
    if not ok:
        bracket = "(" if low_open else "["
        raise WorkshopError(f"{what} {value!r} is out of range; allowed {bracket}{low:g}, {high:g}]")


def _validate(opts: Options) -> None:
    _check_range("tokens", opts.tokens, 0, 1e13, low_open=True)
    for n in opts.nodes:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1000:
            raise WorkshopError(f"nodes must be an integer in [1, 1000], got {n!r}")
    for s in opts.zero_stages:
        check_choice("ZeRO stage", s, (0, 1, 2, 3))
    for mb in opts.micro_batches:
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 1:
            raise WorkshopError(f"micro_batch must be an integer >= 1, got {mb!r}")
    if opts.procs_per_node is not None and opts.procs_per_node < 1:
        raise WorkshopError(f"procs_per_node must be an integer >= 1, got {opts.procs_per_node!r}")
    for what, v in (("max_hours", opts.max_hours), ("budget", opts.budget)):
        if v is not None:
            _check_range(what, v, 0, 1e9, low_open=True)
    _check_range("headroom", opts.headroom, 0, 1)
    for what, rate in (("cpu efficiency", opts.cpu_efficiency), ("gpu efficiency", opts.gpu_efficiency)):
        if rate is not None:
            _check_range(what, rate.value, 0, 1, low_open=True)
    check_choice("GPU stack", opts.stack, STACKS)
    check_choice("CPU engine", opts.cpu_engine, CPU_ENGINES)
    if opts.cpu_efficiency is None:
        rates.cpu_efficiency(opts.cpu_engine, opts.ceiling)  # a bad --ceiling is an error, not "no CPU plan"
    check_choice("storage", opts.fixed.storage, STORAGES)
    _check_range("start-up seconds", opts.fixed.startup_s.value, 0, 7200)
    _check_range("init seconds", opts.fixed.init_s.value, 0, 7200)
    _check_range("download GB/s", opts.fixed.download_gbytes_per_s.value, 0, 100, low_open=True)
    _check_range("checkpoint minutes", opts.fixed.checkpoint_minutes, 0, 1e5)
    _check_range("storage GB/s", opts.fixed.write_rate().value, 0, 1000, low_open=True)
    context = get_preset(opts.model).config.get("max_position_embeddings")
    if context:
        _check_range(f"seq_len (the model's context is {context:,})", opts.seq_len, 1, context)
    if isinstance(opts.global_batch, bool) or not isinstance(opts.global_batch, int) or opts.global_batch < 1:
        raise WorkshopError(f"global batch must be a whole number of tokens >= 1, got {opts.global_batch!r}")
    if opts.global_batch % opts.seq_len:
        raise WorkshopError(
            f"global batch {opts.global_batch:,} tokens is not a whole number of {opts.seq_len}-token "
            "sequences"
        )
    if opts.global_batch > opts.tokens:
        raise WorkshopError(
            f"global batch {opts.global_batch:,} tokens is more than the token budget {opts.tokens:.3g}: not "
            "one whole optimizer step; lower --global-batch or raise --tokens"
        )
    plan_memory(opts.model, world_size=1, seq_len=opts.seq_len, micro_batch=1)  # model and seq_len


# ---------------------------------------------------------------- hints


def _variant(plan: Plan, opts: Options, arch: Architecture, row: InstanceRow, **change) -> Plan | None:
    """The plan with one change, re-estimated with the same fixed costs; None if it does not fit or cannot
    train the global batch."""
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
    if job.tokens_per_step != plan.tokens_per_step or job.grad_accum < 1:
        return None  # a hint never changes the fine-tune
    if job.procs_per_node > (row.gpus or row.cores) or not _fits(row, job, node_opts):
        return None
    return estimate(
        node_for(row, node_opts), job, arch, opts.tokens, calls=_calls(opts.model, job), fixed=opts.fixed
    )


def _allowed(p: Plan, opts: Options) -> bool:
    """Inside every constraint the caller set (deadline, budget; the instance type is the plan's own)."""
    return (opts.max_hours is None or p.hours <= opts.max_hours) and (
        opts.budget is None or (p.usd is not None and p.usd <= opts.budget)
    )


def _candidates(
    plan: Plan, opts: Options, arch: Architecture, row: InstanceRow
) -> list[tuple[str, Plan | None]]:
    out: list[tuple[str, Plan | None]] = []
    if plan.nodes > 1 and plan.nodes // 2 in opts.nodes:  # only node counts the caller allows
        fewer = plan.nodes // 2
        out.append(
            (
                _("{n} x {instance} (half the nodes)").format(n=fewer, instance=row.instance_type),
                best_for(row, fewer, opts, arch),
            )
        )
    if plan.nodes * 2 in opts.nodes:
        more = plan.nodes * 2
        out.append(
            (
                _("{n} x {instance} (twice the nodes)").format(n=more, instance=row.instance_type),
                best_for(row, more, opts, arch),
            )
        )
    if plan.grad_accum % 2 == 0:
        out.append(
            (
                _("micro-batch {mb}, {ga} accumulation steps (same global batch)").format(
                    mb=plan.micro_batch * 2, ga=plan.grad_accum // 2
                ),
                _variant(
                    plan, opts, arch, row, micro_batch=plan.micro_batch * 2, grad_accum=plan.grad_accum // 2
                ),
            )
        )
    if plan.device == "cpu" and plan.nodes > 1 and not opts.ena_express:
        out.append(
            (_("ENA Express (25 Gbps per TCP flow)"), _variant(plan, opts, arch, row, ena_express=True))
        )
    return out


def hint(plan: Plan, opts: Options, arch: Architecture, rows: list[InstanceRow]) -> str:
    """The one change that helps this plan most, re-estimated: offered only when it is cheaper or faster
    and inside the caller's deadline and budget, with the trade stated (in the learner's language)."""
    row = next(r for r in rows if r.instance_type == plan.instance_type)
    if plan.usd is None:
        return _("{bound}-bound; no price known: --price {instance}=USD ranks it").format(
            bound=plan.bound, instance=plan.instance_type
        )
    best: tuple[str, Plan] | None = None
    for label, other in _candidates(plan, opts, arch, row):
        if other is None or other.usd is None or not _allowed(other, opts):
            continue
        if not (other.usd < plan.usd * 0.97 or other.hours < plan.hours * 0.97):
            continue  # not better in cost or time by more than noise
        if best is None or (other.usd, other.hours) < (best[1].usd or math.inf, best[1].hours):
            best = (label, other)
    if best is None:
        return _("{bound}-bound; no single change is cheaper or faster").format(bound=plan.bound)
    label, other = best
    return _(
        "{bound}-bound; {change}: {hours:.3g} h for ${usd:,.0f} instead of {old_hours:.3g} h for "
        "${old_usd:,.0f}"
    ).format(
        bound=plan.bound,
        change=label,
        hours=other.hours,
        usd=other.usd,
        old_hours=plan.hours,
        old_usd=plan.usd,
    )


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
    """The TrainArgs a TrainJob needs to run the plan's job: its split of the global batch (micro-batch,
    accumulation), sequence, precision, ZeRO stage, checkpointing, offload and checkpoint interval."""
    out: dict[str, Any] = {
        "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        "seq_len": plan.seq_len,
        "precision": plan.precision,
        "zero_stage": plan.zero_stage,
        "grad_ckpt": plan.grad_ckpt,
        "offload_optimizer": plan.offload_optimizer,
        "offload_param": plan.offload_param,
    }
    if plan.save_steps:
        out["save_steps"] = plan.save_steps
    return out


def job_settings(plan: Plan, model: str) -> dict[str, Any]:
    """The whole job a rank runs: the model's recipe (lr, warm-up, dataset) with the plan's settings over it;
    what chapter 05 prints is what its TrainJob renders."""
    from workshop.plan.models import recipe

    return {**recipe(model), **train_settings(plan)}


def check_plan_matches(
    plan: Plan, *, nodes: int, procs_per_node: int, instance_type: str | None = None
) -> None:
    """A TrainJob for another cluster than the plan's is refused: same nodes, ranks per node and type."""
    want = (plan.nodes, plan.procs_per_node, plan.instance_type)
    got = (nodes, procs_per_node, instance_type or plan.instance_type)
    if want != got:
        raise WorkshopError(
            f"the plan is sized for {plan.nodes} x {plan.instance_type} with {plan.procs_per_node} rank(s) "
            f"per node, not {nodes} x {got[2]} with {procs_per_node}: re-plan for that cluster"
        )


def within_margin(plans: Sequence[Plan], margin: float = 0.25) -> list[Plan]:
    """The first plan (the pick, chapter 05's job) and the plans costing at most (1 + margin) x the
    cheapest: what chapter 02's NodePool may admit."""
    check_positive("margin", margin, allow_zero=True)
    priced = [p for p in plans if p.usd is not None]
    if not priced:
        raise WorkshopError("no priced plan to take a margin from")
    best = min(p.usd for p in priced if p.usd is not None)
    return [p for p in priced if p is plans[0] or (p.usd is not None and p.usd <= best * (1 + margin))]


def pool_choice(
    plans: Sequence[Plan], rec: Recommendation | None = None, *, source: str | None = None
) -> dict[str, Any]:
    """What karpenter.pool_from_recommendation reads: the instance types that can host the pod chapter 05
    renders (rec: its requests; every plan's type if None), exactly, and the most nodes any plan needs."""
    types = sorted({p.instance_type for p in plans})
    if rec is not None:
        from workshop.plan.memory import allocatable

        cpu = float(rec.cpu_request)
        mem = float(rec.memory_request.removesuffix("Gi"))
        hosts = []
        for t in types:
            gib, vcpus = allocatable(instance_info(t, source=source))
            if gib >= mem and vcpus >= cpu:
                hosts.append(t)
        if rec.instance_type not in hosts:
            hosts.append(rec.instance_type)
        types = sorted(hosts)
    nodes = max(p.nodes for p in plans if p.instance_type in types)
    return {"instance_types": types, "instance_type": types[0], "nodes": nodes, "exact": True}


# ---------------------------------------------------------------- output


def format_table(plans: list[Plan], top: int | None = None) -> str:
    """The ranking: $/h (o = overridden price), the once-per-run dollars (start-up, download, init, final
    save) and the rest (steps, checkpoints, storage: they grow with the tokens); = a tie with the best."""
    head = (
        f"{'#':>2} {'plan':<22} {'ranks':>5} {'ZeRO':>4} {'mb':>3} {'GA':>3} {'ckpt':>4} {'tok/s':>9} "
        f"{'step s':>7} {'bound':<8} {'hours':>7} {'$/h':>8} {'fixed $':>8} {'tokens $':>8} {'USD':>8} P ="
    )
    lines = [head, "-" * len(head)]
    for i, p in enumerate(plans[:top] if top else plans, 1):
        mark = "o" if p.price_kind == "override" else " "
        if p.usd is not None and p.usd_per_hour is not None and p.fixed_usd is not None:
            steps_usd = p.usd - p.fixed_usd
            money = f"{p.usd_per_hour:>7,.2f}{mark} {p.fixed_usd:>8,.0f} {steps_usd:>8,.0f} {p.usd:>8,.0f}"
        else:
            money = f"{'?':>8} {'?':>8} {'?':>8} {'?':>8}"
        lines.append(
            f"{i:>2} {p.label:<22} {p.nodes * p.procs_per_node:>5} {p.zero_stage:>4} {p.micro_batch:>3} "
            f"{p.grad_accum:>3} {'yes' if p.grad_ckpt else 'no':>4} {p.tokens_per_s:>9,.0f} "
            f"{p.step_time_s:>7.3g} {p.bound:<8.8} {p.hours:>7.3g} {money} "
            f"{'*' if p.pareto else ' '} {'=' if p.tie else ''}"
        )
    return "\n".join(lines)


def options_from_args(args: argparse.Namespace) -> Options:
    _check_range("--top", args.top, 1, 10_000)
    fixed = FixedCosts(
        checkpoint_minutes=args.checkpoint_minutes,
        storage=args.storage,
        **{
            k: rates.Rate(v, unit, "override", flag)
            for k, v, unit, flag in (
                ("startup_s", args.startup_s, "s per node", "--startup-s"),
                ("download_gbytes_per_s", args.download_gbps, "GB/s per node", "--download-gbps"),
                ("init_s", args.init_s, "s", "--init-s"),
                ("storage_gbytes_per_s", args.storage_gbps, "GB/s", "--storage-gbps"),
            )
            if v is not None
        },
    )
    opts = Options(
        model=args.model,
        tokens=args.tokens,
        families=tuple(args.family or DEFAULT_FAMILIES),
        nodes=(args.nodes,) if args.nodes is not None else NODE_COUNTS,
        procs_per_node=args.procs_per_node,
        zero_stages=(args.zero,) if args.zero is not None else (3, 2, 1, 0),
        micro_batches=(args.micro_batch,) if args.micro_batch is not None else MICRO_BATCHES,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        grad_ckpt=(args.grad_ckpt,) if args.grad_ckpt is not None else (False, True),
        headroom=args.headroom,
        offload=args.offload,
        placement_group=args.placement_group,
        ena_express=args.ena_express,
        stack=args.stack,
        cpu_engine=args.cpu_engine,
        ceiling=args.ceiling,
        prices=rates.parse_prices(args.price),
        max_hours=args.max_hours,
        budget=args.budget,
        source=args.source,
        fixed=fixed,
    )
    if args.cpu_efficiency is not None:
        _check_range("--cpu-efficiency", args.cpu_efficiency, 0, 1, low_open=True)
        opts.cpu_efficiency = rates.Rate(
            args.cpu_efficiency, "of AMX bf16 peak", "override", "--cpu-efficiency"
        )
    if args.gpu_efficiency is not None:
        _check_range("--gpu-efficiency", args.gpu_efficiency, 0, 1, low_open=True)
        opts.gpu_efficiency = rates.Rate(
            args.gpu_efficiency, "of dense bf16 peak", "override", "--gpu-efficiency"
        )
    return opts


def _whole_number(text: str) -> int:
    """A token count as people write it (8192, 8_192, 1e5): a whole number, else argparse's one-line error."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens")
    return int(value)


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
    p.add_argument(
        "--global-batch",
        type=_whole_number,
        default=DEFAULT_GLOBAL_BATCH,
        help=f"tokens per optimizer step, the same on every plan (default {DEFAULT_GLOBAL_BATCH:,}: the "
        "fine-tune's own, 4 ranks x 1 x 4 x 512)",
    )
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--stack", choices=STACKS, default="hf-deepspeed-bf16", help="GPU software stack")
    p.add_argument("--cpu-engine", choices=CPU_ENGINES, default="deepspeed", help="the CPU job's engine")
    p.add_argument(
        "--ceiling",
        default=None,
        metavar="PATH",
        help="calibrate: a ceiling.json measured on this machine (python -m workshop.experiments.ceiling "
        "--levers no_compile,zero3 --json-out PATH); default: benchmarks/results/ceiling.json",
    )
    p.add_argument(
        "--startup-s", type=float, default=None, help="node start-up seconds (default: image.json)"
    )
    p.add_argument("--download-gbps", type=float, default=None, help="weight download GB/s per node (0.5)")
    p.add_argument("--init-s", type=float, default=None, help="process group + engine init seconds (60)")
    p.add_argument(
        "--checkpoint-minutes", type=float, default=rates.CHECKPOINT_MINUTES, help="0: only the final save"
    )
    p.add_argument("--storage", choices=STORAGES, default="fsx", help="where checkpoints go")
    p.add_argument(
        "--storage-gbps", type=float, default=None, help="checkpoint write GB/s (default: storage's)"
    )
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None, help="default: either")
    p.add_argument("--headroom", type=float, default=0.2)
    p.add_argument("--max-hours", type=float, default=None)
    p.add_argument("--budget", type=float, default=None, help="USD")
    p.add_argument(
        "--placement-group", action="store_true", help="cluster placement group: 10 Gbps per TCP flow"
    )
    p.add_argument("--ena-express", action="store_true", help="ENA Express: 25 Gbps per TCP flow")
    p.add_argument(
        "--cpu-efficiency", type=float, default=None, help="fraction of AMX peak, 0-1 (default: measured)"
    )
    p.add_argument(
        "--gpu-efficiency",
        type=float,
        default=None,
        help="fraction of dense bf16 peak, 0-1 (default: --stack)",
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
        f"{opts.model}, {opts.tokens:.3g} tokens, {opts.global_batch:,} tokens per optimizer step "
        f"({math.ceil(opts.tokens / opts.global_batch):,} steps), seq {opts.seq_len}, GPU stack "
        f"{opts.stack}; "
        "USD = fixed $ (start-up, weight download, init, final save: once per node) + tokens $ (steps, "
        "checkpoints, storage); "
        f"= ties within the planner's {PLANNER_ERROR:.0%} error, ordered by fewer nodes then less time; "
        "* = time-vs-cost Pareto front; o = overridden price"
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
