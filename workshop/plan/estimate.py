"""How long and how much: the time and cost of a fine-tune on each cluster that holds it, and what bounds each
step.

Why: the memory planner says what fits, not whether 24 cores finish in a day or a month, nor that a 4-node
gloo job spends most of its step waiting on one 5 Gbps TCP flow. The estimate per optimizer step is
compute (model FLOPs / effective rate) + exposed collectives (chapter 06's ZeRO bytes over the link each
crosses, plus latency per call) + offload copies + the optimizer step; every rate cites its source
(workshop.plan.rates), and the memory plan is the feasibility filter (workshop.plan.cost ranks the plans).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from workshop.errors import WorkshopError, check_positive
from workshop.lang import N_, _
from workshop.plan import rates
from workshop.plan.job import Job as PlannedJob
from workshop.plan.memory import DEFAULT_ACTIVATIONS, PlanOptions, lora_params
from workshop.plan.models import SEQ_LEN, Architecture
from workshop.plan.nodes import Node
from workshop.plan.options import FixedCosts
from workshop.plan.topology import GB
from workshop.plan.traffic import Traffic, gathers_per_micro_step, step_time, zero_traffic
from workshop.plan.zero3 import Zero3Calls, Zero3Settings, zero3_calls

BOUNDS = ("compute", "network", "pcie/offload", "memory")
# LoRA's step: forward (1/3) + backward without the frozen weights' gradients (1/3) of the full step's FLOPs
LORA_STEP_FLOPS = 2 / 3
# Evaluation: held-out tokens evaluated per trained token, e.g. 0.02 for a 2 % held-out split evaluated once
# an epoch (`workshop plan --eval-share`); forward FLOPs only
# The memory filter models the activations of the stack it ranks (memory.ACTIVATIONS): a tuned stack's fused
# kernels keep less than the workbook's HF transformers, so it fits configurations the workbook's does not.
MEMORY_STACK = N_(
    "ZeRO states + the activations of the stack ranked (CPU and hf-deepspeed-bf16: HF "
    "transformers with SDPA attention; tuned-*: a fused flash-attention stack), full recompute when "
    "checkpointing"
)


@dataclass(frozen=True)
class Candidate:
    """A Job (workshop.plan.job.Job: the job's knobs, declared there once) on `nodes` x `procs_per_node`
    ranks: what the estimator prices. The accumulation is derived from the Job's global batch and the ranks
    (Job.grad_accum), never stored; every knob below is read through."""

    job: PlannedJob
    nodes: int = 1
    procs_per_node: int = 1
    eval_share: float = 0.0  # held-out tokens evaluated per trained token (forward only)

    @classmethod
    def measured(
        cls,
        nodes: int,
        procs_per_node: int,
        zero_stage: int = 3,
        micro_batch: int = 1,
        grad_accum: int = 4,
        seq_len: int = SEQ_LEN,
        grad_ckpt: bool = False,
        offload_optimizer: bool = False,
        offload_param: bool = False,
        **knobs: Any,
    ) -> Candidate:
        """A run someone measured, by its split (nodes, ranks, micro-batch, accumulation, sequence): its
        Job's global batch is what that split trains. The architecture is passed to `estimate` itself;
        `knobs`: the Job's other fields (precision, method) and `eval_share`."""
        eval_share = knobs.pop("eval_share", 0.0)
        global_batch = nodes * procs_per_node * micro_batch * grad_accum * seq_len
        job = PlannedJob(
            model=knobs.pop("model", ""),
            weights="random",
            dataset="local",
            tokens=float(global_batch),
            seq_len=seq_len,
            global_batch=global_batch,
            micro_batch=micro_batch,
            zero_stage=zero_stage,
            grad_ckpt=grad_ckpt,
            offload_optimizer=offload_optimizer,
            offload_param=offload_param,
            **knobs,
        )
        return cls(job, nodes, procs_per_node, eval_share)

    def with_changes(self, **change: Any) -> Candidate:
        """The same candidate with some knobs changed: nodes and ranks here, the rest in its Job (a change
        of `grad_accum` is a change of micro-batch or ranks: it must match what they derive)."""
        accum = change.pop("grad_accum", None)
        own = {k: change.pop(k) for k in ("nodes", "procs_per_node", "eval_share") if k in change}
        out = replace(self, job=replace(self.job, **change), **own)
        if accum is not None and out.grad_accum != accum:
            raise WorkshopError(
                f"grad_accum {accum} is not what the global batch splits into ({out.grad_accum})"
            )
        return out

    @property
    def world(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def tokens_per_step(self) -> int:
        """The global batch: tokens per optimizer step over every rank."""
        return self.job.global_batch

    @property
    def grad_accum(self) -> int:
        return self.job.grad_accum(self.world)

    @property
    def zero_stage(self) -> int:
        return self.job.zero_stage

    @property
    def micro_batch(self) -> int:
        return self.job.micro_batch

    @property
    def seq_len(self) -> int:
        return self.job.seq_len

    @property
    def grad_ckpt(self) -> bool:
        return self.job.grad_ckpt

    @property
    def offload_optimizer(self) -> bool:
        return self.job.offload_optimizer

    @property
    def offload_param(self) -> bool:
        return self.job.offload_param

    @property
    def precision(self) -> str:
        return self.job.precision

    @property
    def method(self) -> str:
        return self.job.method

    @property
    def save_steps(self) -> int:
        return self.job.save_steps


# what `workshop plan --json` prints of a plan's candidate, flat beside its estimate
JOB_FIELDS = (
    "nodes", "procs_per_node", "zero_stage", "micro_batch", "grad_accum", "seq_len", "grad_ckpt",
    "offload_optimizer", "offload_param", "precision", "method", "eval_share", "save_steps",
)  # fmt: skip


@dataclass
class Plan:
    """One candidate, estimated: its Job (held, not copied: the knobs below are views of it), step terms,
    throughput, hours and dollars for the token budget, the bound."""

    instance_type: str
    device: str
    job: Candidate
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
    steps: int = 0
    train_hours: float = 0.0
    fixed_s: dict[str, float] = field(default_factory=dict)  # start-up, download, init, checkpoints, save
    fixed_usd: float | None = (
        None  # paid once: start-up, download, init, final save (not checkpoints, storage)
    )
    price_kind: str = ""  # "price", "override"
    hint: str = ""
    pareto: bool = False
    tie: bool = False  # within PLANNER_ERROR of the best plan's cost

    def to_dict(self) -> dict[str, Any]:
        """The plan flat, as `workshop plan --json` prints it: its Job's knobs beside the estimate."""
        head = {"instance_type": self.instance_type, "device": self.device}
        rest = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in (*head, "job")}
        job = {k: getattr(self.job, k) for k in JOB_FIELDS}
        return {**head, **job, **rest, "tokens_per_step": self.tokens_per_step}

    # the Job's knobs, read through (one declaration: Job's)
    @property
    def nodes(self) -> int:
        return self.job.nodes

    @property
    def procs_per_node(self) -> int:
        return self.job.procs_per_node

    @property
    def zero_stage(self) -> int:
        return self.job.zero_stage

    @property
    def micro_batch(self) -> int:
        return self.job.micro_batch

    @property
    def grad_accum(self) -> int:
        return self.job.grad_accum

    @property
    def seq_len(self) -> int:
        return self.job.seq_len

    @property
    def grad_ckpt(self) -> bool:
        return self.job.grad_ckpt

    @property
    def offload_optimizer(self) -> bool:
        return self.job.offload_optimizer

    @property
    def offload_param(self) -> bool:
        return self.job.offload_param

    @property
    def precision(self) -> str:
        return self.job.precision

    @property
    def method(self) -> str:
        return self.job.method

    @property
    def eval_share(self) -> float:
        return self.job.eval_share

    @property
    def save_steps(self) -> int:
        """The TrainJob's checkpoint interval in steps (its Job's, derived by `estimate`)."""
        return self.job.save_steps

    @property
    def tokens_per_step(self) -> int:
        """The global batch (its Job's)."""
        return self.job.tokens_per_step

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.instance_type}"


def job_of(plan: Plan) -> Candidate:
    """The candidate (a Job on its ranks) a plan trains."""
    return plan.job


def memory_options(job: Candidate | Plan, activations: str = DEFAULT_ACTIVATIONS) -> PlanOptions:
    """The memory planner's options for a job (or a plan's job), with its stack's activation model."""
    return {
        "activations": activations,
        "zero_stage": job.zero_stage,
        "offload_optimizer": job.offload_optimizer,
        "offload_param": job.offload_param,
        "micro_batch": job.micro_batch,
        "seq_len": job.seq_len,
        "grad_ckpt": job.grad_ckpt,
        "dtype": job.precision,
        "method": job.method,
    }


# ---------------------------------------------------------------- the estimate


def collective_calls(arch: Architecture, job: Candidate) -> int:
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


def job_traffic(arch: Architecture, job: Candidate, device: str) -> Traffic:
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


def _zero3_traffic(traffic: Traffic, calls: Zero3Calls, job: Candidate, device: str) -> Traffic:
    """ZeRO-3 bytes from the call-level count (a model small enough keeps its forward gather for backward);
    gloo's reduce-scatter is an all-reduce (2x the bytes)."""
    t = calls.traffic(job.world, job.grad_accum)
    rs = t.reduce_scatter * (2 if device == "cpu" else 1)
    return replace(traffic, all_gather=t.all_gather, reduce_scatter=rs, gathers_per_micro=calls.gather_passes)


@dataclass(frozen=True)
class Step:
    """One optimizer step's terms in seconds (comm and pcie: what overlap leaves exposed), and what they
    came from."""

    compute: float
    comm: float
    pcie: float
    optimizer: float
    flops_per_token: float
    traffic: Traffic
    link_gbytes_per_s: float
    transport: str

    @property
    def total(self) -> float:
        return self.compute + self.comm + self.pcie + self.optimizer

    def terms(self) -> dict[str, float]:
        return {
            "compute": self.compute,
            "network": self.comm,
            "pcie/offload": self.pcie,
            "memory": self.optimizer,
        }


def _compute_s(node: Node, job: Candidate, arch: Architecture) -> tuple[float, float]:
    """(seconds of compute per rank per step, model FLOPs per token)."""
    tokens_rank = job.micro_batch * job.seq_len * job.grad_accum
    full = arch.train_flops(job.seq_len)  # forward 1/3, backward 2/3 (input and weight gradients)
    # LoRA: backward computes no weight gradient for frozen layers (a third of the step saved)
    fpt = full * (LORA_STEP_FLOPS if job.method == "lora" else 1)
    # checkpointing recomputes the forward pass: 1/3 of the full step again
    fpt += full / 3 if job.grad_ckpt else 0
    # evaluation: eval_share held-out tokens per trained token, forward only
    fpt += job.eval_share * full / 3
    per_rank_tflops = node.peak_tflops * node.efficiency.value
    if node.device == "cpu":
        per_rank_tflops /= job.procs_per_node  # ranks share the node's cores
    return tokens_rank * fpt / (per_rank_tflops * 1e12), fpt


def _link(node: Node, job: Candidate) -> tuple[float, float, str]:
    """(GB/s, seconds of latency per call, in words) of the link the job's collectives cross."""
    if job.nodes > 1:
        bw = (
            node.inter_gbytes_per_s
            if job.procs_per_node == 1
            else min(node.inter_gbytes_per_s, node.intra_gbytes_per_s)
        )
        return bw, node.inter_latency.value, node.inter_transport
    transport = _("none (one rank)") if job.world == 1 else _("inside one {node}").format(node=node.name)
    return node.intra_gbytes_per_s, node.intra_latency.value, transport


def gathers_in_cpu_rate(node: Node, job: Candidate) -> bool:
    """ZeRO-3 on one CPU host: its parameter gathers are loopback copies inside the CPU rate already (the
    slice that calibrates it times forward+backward with the gathers inside, less only the gradient reduce),
    so the exposed collectives are the reduce alone; across hosts the gathers cross the link and count."""
    return node.device == "cpu" and job.nodes == 1 and job.zero_stage == 3 and job.world > 1


def step_terms(node: Node, job: Candidate, arch: Architecture, calls: Zero3Calls | None = None) -> Step:
    """One optimizer step on `node`: compute, exposed collectives (bytes over the link + latency per call),
    exposed offload copies and the optimizer's memory-bound update, each in seconds."""
    compute, fpt = _compute_s(node, job, arch)
    traffic = job_traffic(arch, job, node.device)
    n_calls = collective_calls(arch, job)
    if calls is not None and job.zero_stage == 3 and job.world > 1:
        traffic = _zero3_traffic(traffic, calls, job, node.device)
        n_calls = sum(calls.n_ops.values())
    bw, latency, transport = _link(node, job)
    pcie_bw = node.pcie_gbytes_per_s if (job.offload_optimizer or job.offload_param) else None
    pred = step_time(
        replace(traffic, all_gather=0.0) if gathers_in_cpu_rate(node, job) else traffic,
        collective_gbytes_per_s=bw,
        compute_s=compute,
        overlap=node.overlap.value,
        pcie_gbytes_per_s=pcie_bw,
    )
    hidden = 1 - node.overlap.value
    trained = lora_params(arch) if job.method == "lora" else arch.params  # what Adam updates
    shard = trained / (job.world if job.zero_stage >= 1 else 1)
    opt_bw = node.host_mem_gbytes_per_s if job.offload_optimizer else node.mem_gbytes_per_s
    if node.device == "cpu" or job.offload_optimizer:
        opt_bw /= job.procs_per_node  # ranks of one node share its DDR
    return Step(
        compute=compute,
        comm=hidden * (pred.collective_s + n_calls * latency),
        pcie=hidden * pred.pcie_s,
        optimizer=shard * rates.ADAM_BYTES_PER_PARAM.value / (opt_bw * GB),
        flops_per_token=fpt,
        traffic=traffic,
        link_gbytes_per_s=bw,
        transport=transport,
    )


def run_costs(
    usd_per_hour: float | None, arch: Architecture, tokens: float, train_s: float, fixed: FixedCosts | None
) -> dict[str, Any]:
    """The run around `train_s` seconds of steps: fixed_s (seconds per fixed cost), hours (wall clock),
    usd (all nodes, storage included), fixed_usd (paid once: start-up, download, init, final save) and
    usd_per_mtok; None where the price is unknown."""
    terms = fixed.terms(arch, train_s) if fixed else {}
    hours = (train_s + sum(terms.values())) / 3600
    storage_usd = fixed.storage_usd(arch, hours) if fixed else 0.0
    usd = usd_per_hour * hours + storage_usd if usd_per_hour is not None else None
    once = sum(v for k, v in terms.items() if k != "checkpoints")  # paid once, whatever the budget
    return {
        "fixed_s": terms,
        "hours": hours,
        "usd": usd,
        "fixed_usd": usd_per_hour * once / 3600 if usd_per_hour is not None else None,
        "usd_per_mtok": usd / tokens * 1e6 if usd is not None else None,
    }


def _sources(node: Node, job: Candidate, s: Step, fixed: FixedCosts | None) -> dict[str, str]:
    """Where every number of the estimate comes from, by term."""
    return {
        **node.sources,
        "flops": f"{s.flops_per_token / 1e9:.1f} GFLOP/token: 6 x params + 12 x layers x hidden x seq"
        + (_(" x 2/3 (LoRA: no weight gradients of frozen layers)") if job.method == "lora" else "")
        + (
            (_(" + 1/3 (recompute)") if job.method == "lora" else _(" x 4/3 (recompute)"))
            if job.grad_ckpt
            else ""
        )
        + (
            _(" + {share:g} x 1/3 (evaluation: held-out tokens per trained token, forward only)").format(
                share=job.eval_share
            )
            if job.eval_share
            else ""
        ),
        "traffic": _("chapter 06's ZeRO-{stage} model: {gb:.1f} GB per rank per step").format(
            stage=job.zero_stage, gb=s.traffic.collective / GB
        )
        + (
            _(
                "; on one host its parameter gathers are inside the CPU rate (the slice times them in its "
                "forward+backward): only the gradient reduce is exposed"
            )
            if gathers_in_cpu_rate(node, job)
            else ""
        ),
        "optimizer": rates.ADAM_BYTES_PER_PARAM.cite(),
        "price": node.usd_per_hour.cite() if node.usd_per_hour else _("unknown: pass --price TYPE=USD"),
        **(fixed.cite() if fixed else {}),
        "memory plan": _(MEMORY_STACK),
    }


def estimate(
    node: Node,
    job: Candidate,
    arch: Architecture,
    tokens: float,
    *,
    calls: Zero3Calls | None = None,
    fixed: FixedCosts | None = None,
) -> Plan:
    """Time per optimizer step and everything derived from it, for `tokens` trained tokens: a Plan with
    seconds per step by term, tokens/s, hours, USD and the bound. `calls`: the call-level ZeRO-3 count
    (zero3_for) for the same grad_accum and checkpointing, where the model is a preset. `fixed`: the run's
    costs besides its steps (none: the steps alone, as costcheck compares)."""
    check_positive("tokens", tokens)
    if job.procs_per_node > node.max_ranks:
        raise WorkshopError(f"{job.procs_per_node} ranks per node but {node.name} has {node.max_ranks}")
    s = step_terms(node, job, arch, calls)
    step = s.total
    steps = math.ceil(tokens / job.tokens_per_step)
    usd_h = node.usd_per_hour.value * job.nodes if node.usd_per_hour else None
    every = fixed.every_s(arch) if fixed else 0.0
    save_steps = max(1, round(every / step)) if every > 0 else 0
    if save_steps >= steps:  # the interval outlasts the run: only the final save (a TrainJob's 0)
        save_steps = 0
    job = replace(job, job=replace(job.job, save_steps=save_steps))
    return Plan(
        instance_type=node.name,
        device=node.device,
        job=job,
        threads_per_rank=max(1, node.max_ranks // job.procs_per_node) if node.device == "cpu" else 1,
        tokens=tokens,
        tokens_per_s=job.tokens_per_step / step,
        step_time_s=step,
        compute_s=s.compute,
        comm_s=s.comm,
        pcie_s=s.pcie,
        optimizer_s=s.optimizer,
        gb_per_rank_per_step=s.traffic.collective / GB,
        link_gbytes_per_s=s.link_gbytes_per_s,
        transport=s.transport,
        bound=_bound(s.terms()),
        usd_per_hour=usd_h,
        sources=_sources(node, job, s, fixed),
        steps=steps,
        train_hours=steps * step / 3600,
        price_kind=node.usd_per_hour.kind if node.usd_per_hour else "",
        **run_costs(usd_h, arch, tokens, steps * step, fixed),
    )
