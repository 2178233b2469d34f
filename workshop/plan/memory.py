"""ZeRO memory per rank, from the exact parameter count, and the smallest instance that holds it.

Why a planner: the original workshop sized its pods from one log line (24.47 GB per rank "after ZeRO init"),
but that line comes before the first optimizer step, so Adam's two fp32 moments and the activations are not in
it yet. Counting every component from the parameter count shows what a pod must really hold, and where.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import TypedDict

from workshop.errors import WorkshopError, check_choice, check_positive, report
from workshop.lang import N_, _
from workshop.plan.catalog import PRICE_SOURCE, InstanceRow, list_instances
from workshop.plan.models import Architecture, architecture

GiB = 1024**3
ZERO_STAGES = (0, 1, 2, 3)
DTYPES = {"bf16": 2, "fp16": 2, "fp32": 4}
DEVICES = ("cpu", "gpu")

# Per-rank process overhead (torch, DeepSpeed, Python, tokenized data): the original workshop's first ZeRO-3
# log line (MA 4.81 GiB, RSS of one rank) minus that rank's bf16 shard of Llama-3-8B (3.74 GiB) = 1.07 GiB.
RUNTIME_HOST_BYTES = int(1.07 * GiB)
# CUDA context + NCCL buffers on each GPU (typical for an H100/A100 process).
RUNTIME_DEVICE_BYTES = 1 * GiB
# DeepSpeed's default stage-3 sub_group_size: the fp32 gradient of one sub-group is built at step time.
SUB_GROUP_SIZE = 1_000_000_000


class PlanOptions(TypedDict):
    """plan_memory's training options (all but the model and the ranks), as `recommend` passes them on."""

    zero_stage: int
    offload_optimizer: bool
    offload_param: bool
    micro_batch: int
    seq_len: int
    grad_ckpt: bool
    dtype: str


class RunSpec(PlanOptions):
    """A whole run as plan_memory's keyword arguments: `plan_memory(**spec)`."""

    model: str
    world_size: int
    procs_per_node: int
    device: str


# The original workshop's measured run (chapter 002): Llama-3-8B, ZeRO-3, offload_param + offload_optimizer to
# cpu, bf16, 4 ranks on one host, micro-batch 1, seq 512. DeepSpeed prints these in GiB (bytes / 1024**3).
ORIGINAL_RUN: RunSpec = {
    "model": "llama-3-8b",
    "world_size": 4,
    "procs_per_node": 4,
    "zero_stage": 3,
    "offload_optimizer": True,
    "offload_param": True,
    "micro_batch": 1,
    "seq_len": 512,
    "grad_ckpt": False,
    "dtype": "bf16",
    "device": "cpu",
}
ORIGINAL_STAGES_GIB = {
    "Stage 3 initialize beginning": 4.81,
    "After creating fp16 partitions": 5.44,
    "After creating fp32 partitions": 12.92,
    "After initializing optimizer states": 20.40,
    "After initializing ZeRO optimizer": 24.47,
}
ORIGINAL_HOST_USED_GIB = {"start": 26.09, "after ZeRO init": 104.54}

# Node capacity a pod can actually request, the way Karpenter and the EKS AMI compute it.
VM_MEMORY_OVERHEAD = 0.075  # Karpenter's default vmMemoryOverheadPercent
MAX_PODS = 110  # kubelet default; kube-reserved memory = 255 MiB + 11 MiB per pod (EKS AMI)
EVICTION_MIB = 100


def activation_bytes(
    arch: Architecture, micro_batch: int, seq_len: int, grad_ckpt: bool, dtype_bytes: int = 2
) -> dict[str, int]:
    """Bytes autograd keeps for backward in a Llama decoder (SDPA attention), per micro-batch.

    Per token and layer: 2 RMSNorms (fp32 upcast 4h + normalized 2h + its scaled output 2h = 8h each), q and
    attention output 2h each, k and v 2*kv each, the SDPA log-sum-exp 4*heads, and the SwiGLU MLP 8*f (gate,
    silu(gate), up, product). With checkpointing only each layer's 2h input is kept, plus one layer rebuilt
    during backward. The head keeps the fp32 log-softmax of the logits (4*vocab per token).
    Checked against a real forward pass in tests (saved-tensor hooks).
    """
    tokens = micro_batch * seq_len
    s = dtype_bytes / 2  # the coefficients above are for 16-bit activations
    kv = arch.kv_heads * arch.head_dim
    per_layer = int(s * (20 * arch.hidden + 4 * kv + 8 * arch.intermediate)) + 4 * arch.heads
    head = 4 * arch.vocab + int(s * 8 * arch.hidden)
    kept = arch.layers * (int(s * 2 * arch.hidden) if grad_ckpt else per_layer)
    working = per_layer if grad_ckpt else 0  # the layer being recomputed
    # the bf16 logits and their fp32 upcast exist together for a moment at the loss
    transient = (int(s * 2) + 4) * arch.vocab
    return {
        "saved": tokens * (kept + head),
        "recompute": tokens * working,
        "loss_transient": tokens * transient,
    }


@dataclass
class MemoryPlan:
    """Per-rank bytes by component, where each lives, and the totals a pod and a node must hold."""

    model: str
    params: int
    world_size: int
    procs_per_node: int
    zero_stage: int
    offload_optimizer: bool
    offload_param: bool
    micro_batch: int
    seq_len: int
    grad_ckpt: bool
    dtype: str
    device: str
    components: dict[str, int] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)

    def _sum(self, where: str | None = None) -> int:
        return sum(v for k, v in self.components.items() if where is None or self.placement[k] == where)

    @property
    def total(self) -> int:
        """Per-rank peak during training (all components)."""
        return self._sum()

    @property
    def host_bytes(self) -> int:
        return self._sum("host")

    @property
    def device_bytes(self) -> int:
        return self._sum("device")

    @property
    def host_total(self) -> int:
        """Host memory the ranks of one node need together (node overhead not included)."""
        return self.procs_per_node * self.host_bytes

    @property
    def at_zero_init(self) -> int:
        """What DeepSpeed has allocated by 'After initializing ZeRO optimizer' (before any step)."""
        keys = ("runtime", "params", "master_fp32", "optimizer_grads_fp32", "grads")
        offload_grads = self.offload_optimizer
        return sum(self.components.get(k, 0) for k in keys if k != "optimizer_grads_fp32" or offload_grads)

    def stages(self) -> list[tuple[str, int]]:
        """Cumulative per-rank bytes in the order DeepSpeed's stage-3 log reports them, then training."""
        c = self.components
        steps = [
            ("Stage 3 initialize beginning", c["runtime"] + c["params"]),
            ("After creating fp16 partitions", 0),
            ("After creating fp32 partitions", c.get("master_fp32", 0)),
            (
                "After initializing optimizer states",
                c["optimizer_grads_fp32"] if self.offload_optimizer else 0,
            ),
            ("After initializing ZeRO optimizer", c["grads"]),
            ("After the first step (Adam moments)", c["adam_moments"]),
            (
                "Training peak (activations, gathered layer, step buffers)",
                c["activations"]
                + c["gathered_params"]
                + c.get("cuda_context", 0)
                + (0 if self.offload_optimizer else c["optimizer_grads_fp32"]),
            ),
        ]
        out, running = [], 0
        for label, add in steps:
            running += add
            out.append((label, running))
        return out

    def explain(self) -> str:
        """Every component of the per-rank total, in GiB, with why it is there (the chapter prints this)."""
        w, offl = self.world_size, self.offload_optimizer
        why = {
            "runtime": _(
                "torch, DeepSpeed, Python, tokenized data (calibrated on the original workshop's log)"
            ),
            "params": _("{dtype} parameters").format(dtype=self.dtype)
            + (_(", 1/{w} each (ZeRO-3)").format(w=w) if self.zero_stage >= 3 else ""),
            "grads": _("{dtype} gradients").format(dtype=self.dtype)
            + (_(", 1/{w} each (ZeRO-2+)").format(w=w) if self.zero_stage >= 2 else ""),
            "master_fp32": _("fp32 master copy of the weights")
            + (f", 1/{w}" if self.zero_stage >= 1 else ""),
            "adam_moments": _("Adam's two fp32 moments, created at the first step")
            + (f", 1/{w}" if self.zero_stage else ""),
            "optimizer_grads_fp32": (
                _("fp32 copy of the gradient partition that CPU Adam reads (offload), 1/{w}").format(w=w)
                if offl
                else _(
                    "fp32 gradient of ONE optimizer sub-group, built at step time (DeepSpeed's "
                    "sub_group_size = {size:.0e} parameters x 4 B)"
                ).format(size=SUB_GROUP_SIZE)
            ),
            "gathered_params": _("the largest layer, all-gathered whole (fp32-sized working buffer)"),
            "activations": (
                _("activations kept for backward: micro-batch {mb} x {seq} tokens").format(
                    mb=self.micro_batch, seq=self.seq_len
                )
                + (_(", checkpointed") if self.grad_ckpt else "")
            ),
            "cuda_context": _("CUDA context and NCCL buffers"),
            "load_staging": _("checkpoint shard read into host memory before the GPU copy"),
        }
        lines = [
            f"{k:22s} {v / GiB:7.2f} GiB  {self.placement[k]:6s}  {why.get(k, '')}"
            for k, v in self.components.items()
        ]
        lines.append(f"{'total per rank':22s} {self.total / GiB:7.2f} GiB")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "total": self.total,
            "host_bytes": self.host_bytes,
            "device_bytes": self.device_bytes,
            "host_total": self.host_total,
            "at_zero_init": self.at_zero_init,
            "stages": self.stages(),
        }


def _check_int(what: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WorkshopError(f"{what} must be an integer >= {minimum}, got {value!r}")


def plan_memory(
    model: str,
    *,
    world_size: int,
    zero_stage: int = 3,
    offload_optimizer: bool = False,
    offload_param: bool = False,
    micro_batch: int = 1,
    seq_len: int = 512,
    grad_ckpt: bool = False,
    dtype: str = "bf16",
    device: str = "cpu",
    procs_per_node: int | None = None,
) -> MemoryPlan:
    """Per-rank bytes for params, grads, fp32 master, Adam moments, activations and runtime overhead.

    ZeRO-1 partitions the optimizer state (master + moments), ZeRO-2 also the gradients, ZeRO-3 also the
    parameters; each partition is 1/world_size. On a CPU everything is host memory; on a GPU the offload
    flags decide what moves to the host.
    """
    _check_int("world_size", world_size)
    _check_int("micro_batch", micro_batch)
    _check_int("seq_len", seq_len)
    check_choice("ZeRO stage", zero_stage, ZERO_STAGES)
    check_choice("dtype", dtype, DTYPES)
    check_choice("device", device, DEVICES)
    procs_per_node = procs_per_node or world_size
    _check_int("procs_per_node", procs_per_node)
    if procs_per_node > world_size:
        raise WorkshopError(f"procs_per_node {procs_per_node} exceeds world_size {world_size}")
    if offload_param and zero_stage != 3:
        raise WorkshopError(f"offload_param needs ZeRO stage 3 (got stage {zero_stage})")
    if offload_optimizer and zero_stage == 0:
        raise WorkshopError("offload_optimizer needs ZeRO stage 1, 2 or 3 (got stage 0)")
    arch = architecture(model)
    P, W, d = arch.params, world_size, DTYPES[dtype]  # noqa: N806 (the formulas' P and W)

    def part(n_bytes_per_param: float, stage_from: int) -> int:
        return math.ceil(n_bytes_per_param * P / (W if zero_stage >= stage_from else 1))

    acts = activation_bytes(arch, micro_batch, seq_len, grad_ckpt, d)
    comp = {
        "runtime": RUNTIME_HOST_BYTES,
        "params": part(d, 3),
        "grads": part(d, 2),
        "master_fp32": part(4, 1) if d < 4 else 0,
        "adam_moments": part(8, 1),
        # offloaded optimizer: CPU Adam reads an fp32 copy of the gradient partition; otherwise stage 3
        # builds one sub-group's fp32 gradient at step time.
        "optimizer_grads_fp32": (
            part(4, 1) if offload_optimizer else (4 * min(P // W, SUB_GROUP_SIZE) if zero_stage == 3 else 0)
        ),
        "gathered_params": 4 * arch.largest_layer_params if zero_stage == 3 else 0,
        "activations": sum(acts.values()),
    }
    if device == "gpu":
        comp["cuda_context"] = RUNTIME_DEVICE_BYTES
        if not offload_param:  # each rank reads its checkpoint shard into host memory before the GPU copy
            comp["load_staging"] = part(d, 3)
    host = "host"
    dev = "host" if device == "cpu" else "device"
    opt_where = host if offload_optimizer else dev
    placement = {
        "runtime": host,
        "params": host if offload_param else dev,
        "grads": opt_where,
        "master_fp32": opt_where,
        "adam_moments": opt_where,
        "optimizer_grads_fp32": opt_where,
        "gathered_params": dev,
        "activations": dev,
        "cuda_context": dev,
        "load_staging": host,
    }
    return MemoryPlan(
        model,
        P,
        W,
        procs_per_node,
        zero_stage,
        offload_optimizer,
        offload_param,
        micro_batch,
        seq_len,
        grad_ckpt,
        dtype,
        device,
        comp,
        {k: placement[k] for k in comp},
    )


class DeepSpeedEstimate(TypedDict):
    """Bytes from DeepSpeed's estimator (model states only)."""

    host_per_node: float
    host_per_rank: float
    device_per_rank: float
    largest_layer_bytes: float
    buffer_factor: float


def deepspeed_estimate(
    model: str,
    *,
    nodes: int,
    procs_per_node: int,
    offload_optimizer: bool = True,
    offload_param: bool = True,
    buffer_factor: float = 1.0,
) -> DeepSpeedEstimate:
    """DeepSpeed's own ZeRO-3 model-states estimate (params, grads, optimizer; no activations), per rank.

    Calls `estimate_zero3_model_states_mem_needs`, the function behind
    `estimate_zero3_model_states_mem_needs_all_cold`, so the numbers come back instead of being printed.
    DeepSpeed's default buffer_factor is 1.5; 1.0 gives the bare count.
    """
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    arch = architecture(model)
    cpu_node, gpu_rank, largest = estimate_zero3_model_states_mem_needs(
        arch.params,
        arch.largest_layer_params,
        num_gpus_per_node=procs_per_node,
        num_nodes=nodes,
        cpu_offload=offload_optimizer,
        cpu_offload_params=offload_param,
        zero_init=True,
        additional_buffer_factor=buffer_factor,
    )
    return {
        "host_per_node": cpu_node,
        "host_per_rank": cpu_node / procs_per_node,
        "device_per_rank": gpu_rank,
        "largest_layer_bytes": largest,
        "buffer_factor": buffer_factor,
    }


class StageRow(TypedDict):
    """A row of chapter 01's stage table: the planner's cumulative GiB per rank beside the original log's."""

    stage: str
    plan_gib: float
    original_gib: float | None  # None: a stage the original workshop's log does not print
    diff_pct: float | None


def original_comparison() -> list[StageRow]:
    """The planner's cumulative stages beside the original workshop's measured ZeRO-3 log (GiB per rank)."""
    plan = plan_memory(**ORIGINAL_RUN)
    rows: list[StageRow] = []
    for label, planned in plan.stages():
        original = ORIGINAL_STAGES_GIB.get(label)
        gib = planned / GiB
        rows.append(
            {
                "stage": label,
                "plan_gib": round(gib, 2),
                "original_gib": original,
                "diff_pct": round(100 * (gib - original) / original, 1) if original else None,
            }
        )
    return rows


# What each source counts, per parameter and rank (x world size), for one ZeRO-3 rank with both offloads.
# DeepSpeed's estimator: 18 bytes = bf16 params 2 + fp32 master 4 + fp32 grads 4 + Adam moments 8
# (estimate_zero3_model_states_mem_needs, cpu_offload and cpu_offload_params); it has no bf16 gradient
# partition, no activations and no process runtime. The original workshop's log: resident memory per rank at
# each stage.
RECONCILE_TERMS = [
    # (planner component, bytes/param, in DeepSpeed's estimator, the original workshop log line it first shows
    # in)
    ("params", 2, True, "Stage 3 initialize beginning"),
    ("master_fp32", 4, True, "After creating fp32 partitions"),
    ("optimizer_grads_fp32", 4, True, "After initializing optimizer states"),
    ("grads", 2, False, "After initializing ZeRO optimizer"),
    ("adam_moments", 8, True, N_("not in the log: Adam creates its moments at the first step")),
]


class ReconcileRow(TypedDict):
    """One model-state term of `reconcile()`: its bytes per parameter, the planner's GiB, who counts it."""

    term: str  # a MemoryPlan component
    bytes_per_param: int
    planner_gib: float
    deepspeed_counts_it: bool
    original_log: str  # the original workshop's log line it first shows in


class Reconciliation(TypedDict):
    """`reconcile()`'s record: planner, DeepSpeed's estimator and the original log, GiB per rank."""

    rows: list[ReconcileRow]
    model_states_bytes_per_param: int
    deepspeed_bytes_per_param: int
    planner_model_states_gib: float
    deepspeed_model_states_gib: float
    planner_only_gib: dict[str, float]  # only the planner counts these: runtime, activations, ...
    planner_at_zero_init_gib: float
    original_log_at_zero_init_gib: float
    planner_training_peak_gib: float
    original_virtual_gb_per_process: int | None  # the original's ~60 GB (virtual memory), for Llama-3-8B only


def reconcile(plan: MemoryPlan | None = None) -> Reconciliation:
    """One memory story: the planner, DeepSpeed's estimator and the original workshop's log, term by term (GiB
    per rank).

    Bytes per parameter: 16 in mixed precision without offload (bf16 params 2 + bf16 grads 2 + fp32 master 4
    + Adam 8); 20 with the optimizer offloaded (+ the fp32 gradient copy CPU Adam reads); DeepSpeed's
    estimator says 18 because it leaves out the bf16 gradient partition. Resident (RSS, what DeepSpeed's "MA"
    and the planner count) is not virtual memory: the original workshop's "~60 GB per process" is virtual
    (mapped libraries, allocator reservations), not what a pod's memory request must hold.
    """
    plan = plan or plan_memory(**ORIGINAL_RUN)
    P, W = plan.params, plan.world_size  # noqa: N806 (the formulas' P and W)
    ds = deepspeed_estimate(
        plan.model,
        nodes=max(1, W // plan.procs_per_node),
        procs_per_node=plan.procs_per_node,
        offload_optimizer=plan.offload_optimizer,
        offload_param=plan.offload_param,
    )
    rows: list[ReconcileRow] = []
    for comp, bpp, in_ds, log_line in RECONCILE_TERMS:
        planned = plan.components.get(comp, 0)
        if not planned or (comp == "optimizer_grads_fp32" and not plan.offload_optimizer):
            continue  # without offload this is one sub-group's step buffer, not bytes per parameter
        rows.append(
            {
                "term": comp,
                "bytes_per_param": bpp,
                "planner_gib": round(planned / GiB, 2),
                "deepspeed_counts_it": in_ds,
                "original_log": log_line,
            }
        )
    states_bpp = sum(r["bytes_per_param"] for r in rows)
    ds_bpp = sum(r["bytes_per_param"] for r in rows if r["deepspeed_counts_it"])
    rest = {
        k: round(plan.components.get(k, 0) / GiB, 2) for k in ("runtime", "activations", "gathered_params")
    }
    if not plan.offload_optimizer and plan.components.get("optimizer_grads_fp32"):
        rest["fp32 grad sub-group"] = round(plan.components["optimizer_grads_fp32"] / GiB, 2)
    return {
        "rows": rows,
        "model_states_bytes_per_param": states_bpp,
        "deepspeed_bytes_per_param": ds_bpp,
        "planner_model_states_gib": round(states_bpp * P / W / GiB, 2),
        "deepspeed_model_states_gib": round(ds["host_per_rank"] / GiB, 2),
        "planner_only_gib": rest,
        "planner_at_zero_init_gib": round(plan.at_zero_init / GiB, 2),
        "original_log_at_zero_init_gib": ORIGINAL_STAGES_GIB["After initializing ZeRO optimizer"],
        "planner_training_peak_gib": round(plan.total / GiB, 2),
        "original_virtual_gb_per_process": 60 if plan.model == "llama-3-8b" else None,
    }


def original_log_reading(plan: MemoryPlan | None = None) -> list[str]:
    """What each jump in the original workshop's ZeRO-3 memory log is, from RECONCILE_TERMS (the table chapter
    01 prints): one place says when Adam's moments appear, so chapters 01 and 04 cannot disagree."""
    plan = plan or plan_memory(**ORIGINAL_RUN)
    first = {line: (term, bpp) for term, bpp, _ds, line in RECONCILE_TERMS}
    out, prev = [], None
    for line, gib in ORIGINAL_STAGES_GIB.items():
        term = first.get(line)
        delta = f"{gib - prev:+.2f}" if prev is not None else f"{gib:.2f}"
        what = (
            f"{term[0]} ({term[1]} B x {plan.params / 1e9:.2f} B parameters / {plan.world_size} ranks = "
            f"{plan.components.get(term[0], 0) / GiB:.2f} GiB)"
            if term
            else "allocator copies (the flat buffers of the bf16 shards)"
        )
        out.append(f"{line}: {gib:.2f} GiB ({delta}) = {what}")
        prev = gib
    moments = next(line for term, _b, _ds, line in RECONCILE_TERMS if term == "adam_moments")
    out.append(
        f"adam_moments ({plan.components['adam_moments'] / GiB:.2f} GiB per rank): {moments}, after every "
        f"line above (planner: {dict(plan.stages())['After the first step (Adam moments)'] / GiB:.2f} GiB "
        "after it)"
    )
    return out


def format_reconcile(r: Reconciliation) -> str:
    """The reconciliation as the table and three lines chapter 01 prints."""
    lines = [
        f"{'term':22s} {'B/param':>7s} {'planner GiB':>11s}  DeepSpeed?  original log",
        *(
            f"{x['term']:22s} {x['bytes_per_param']:7d} {x['planner_gib']:11.2f}  "
            f"{'yes' if x['deepspeed_counts_it'] else 'no':10s}  {_(x['original_log'])}"
            for x in r["rows"]
        ),
        _(
            "model states: planner {p_bpp} B/param = {p_gib} GiB per rank; DeepSpeed {d_bpp} B/param = "
            "{d_gib} GiB (no bf16 gradient partition)"
        ).format(
            p_bpp=r["model_states_bytes_per_param"],
            p_gib=r["planner_model_states_gib"],
            d_bpp=r["deepspeed_bytes_per_param"],
            d_gib=r["deepspeed_model_states_gib"],
        ),
        _("planner only: {terms}").format(
            terms=", ".join(f"{k} {v} GiB" for k, v in r["planner_only_gib"].items())
        ),
        _(
            "before the first step: planner {p_gib} GiB, original workshop's log {o_gib} GiB resident "
            "(DeepSpeed's MA)"
        ).format(p_gib=r["planner_at_zero_init_gib"], o_gib=r["original_log_at_zero_init_gib"]),
        _("training peak: planner {gib} GiB resident").format(gib=r["planner_training_peak_gib"])
        + (
            _(
                "; the original workshop's ~{gb} GB per process is VIRTUAL memory (address space "
                "reserved, not resident): size pods from the resident figure"
            ).format(gb=r["original_virtual_gb_per_process"])
            if r["original_virtual_gb_per_process"]
            else ""
        ),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- recommend


def allocatable(row: InstanceRow) -> tuple[float, float]:
    """(GiB, vCPUs) a pod can request on this instance type, after VM, kubelet and eviction reserves."""
    kube_mib = 255 + 11 * MAX_PODS
    mem = row.memory_gib * (1 - VM_MEMORY_OVERHEAD) - (kube_mib + EVICTION_MIB) / 1024
    v = row.vcpus
    reserved_m = 60 + 10 * (v > 1) + 5 * max(0, min(v, 4) - 2) + 2.5 * max(0, v - 4)  # EKS AMI kube-reserved
    return mem, v - reserved_m / 1000


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
    if not gpu and ppn > row.cores:
        return None, _("{ppn} ranks per node but only {cores} physical cores").format(
            ppn=ppn, cores=row.cores
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
    if host_need > mem_alloc:
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
    seq_len: int = 512,
    grad_ckpt: bool = False,
    dtype: str = "bf16",
    headroom: float = 0.2,
    efa: bool | None = None,
    source: str | None = None,
) -> Recommendation:
    """The smallest instance type (then node count, if `nodes` is None) of `families` that fits with headroom.

    CPU families: one pod per node holds `procs_per_node` ranks (default 1) in host memory. GPU families:
    one rank per GPU (default: all of them), device memory per GPU and offloaded state in host memory.
    EFA is required for multi-node plans unless `efa=False`. Nothing fits -> WorkshopError saying why.
    """

    if nodes is not None:
        _check_int("nodes", nodes)
    if procs_per_node is not None:
        _check_int("procs_per_node", procs_per_node)
    check_positive("headroom", headroom, allow_zero=True)
    plan_kw: PlanOptions = {
        "zero_stage": zero_stage,
        "offload_optimizer": offload_optimizer,
        "offload_param": offload_param,
        "micro_batch": micro_batch,
        "seq_len": seq_len,
        "grad_ckpt": grad_ckpt,
        "dtype": dtype,
    }
    plan_memory(model, world_size=1, **plan_kw)  # validate model and options before any catalog query
    families = [families] if isinstance(families, str) else list(families)
    rows, _source = list_instances(families, source=source)
    node_counts = [nodes] if nodes else [1, 2, 4, 8, 16, 32]
    why_not: dict[str, str] = {}
    for n in node_counts:
        need_efa = (n > 1) if efa is None else efa
        fits = []
        for r in rows:
            if need_efa and not r.efa:
                why_not[r.instance_type] = _("no EFA (needed between nodes)")
                continue
            got, why = fit_instance(
                r, model=model, nodes=n, procs_per_node=procs_per_node, headroom=headroom, plan_kw=plan_kw
            )
            if got:
                fits.append((r, got))
            else:
                why_not[r.instance_type] = why
        if fits:
            fits.sort(key=lambda f: (f[0].gpus, f[0].memory_gib, f[0].vcpus, f[0].bare_metal))
            best, got = fits[0]
            rec = _recommendation(model, best, got, n, fits, headroom, PRICE_SOURCE)
            rec.constraints = _constraints(
                rec,
                rows,
                need_efa,
                efa,
                families,
                model=model,
                nodes=n,
                procs_per_node=procs_per_node,
                headroom=headroom,
                plan_kw=plan_kw,
                source=source,
            )
            rec.reason = " ".join([rec.reason, *rec.constraints])
            return rec
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
    raise WorkshopError(
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


def recommend_instance(
    model: str,
    instance_type: str,
    *,
    nodes: int,
    procs_per_node: int,
    plan_kw: PlanOptions,
    headroom: float = 0.2,
    source: str | None = None,
) -> Recommendation:
    """The pod sizes for one named instance type (the cost planner's pick), or why it does not hold the
    plan."""
    from workshop.plan.catalog import instance_info

    row = instance_info(instance_type, source=source)
    got, why = fit_instance(
        row, model=model, nodes=nodes, procs_per_node=procs_per_node, headroom=headroom, plan_kw=plan_kw
    )
    if got is None:
        raise WorkshopError(f"{model} on {nodes} x {instance_type}: {why}")
    return _recommendation(model, row, got, nodes, [(row, got)], headroom, PRICE_SOURCE)


def _constraints(rec, rows, need_efa, efa, families, **kw) -> list[str]:
    """The rules besides memory that decided the pick, each with what it costs (EFA above all: in the Xeon
    families only the 48xlarge and metal sizes have it, so a multi-node plan jumps to the largest size)."""
    out = []
    if need_efa:
        with_efa = sorted({r.instance_type.split(".")[1] for r in rows if r.efa})
        out.append(
            _("Multi-node needs EFA, which in {families} only the {sizes} size(s) offer.").format(
                families="/".join(families), sizes=", ".join(with_efa) or _("no")
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
        out.append(
            _("One pod per node with {ranks} rank(s), {threads} thread(s) each.").format(
                ranks=rec.procs_per_node, threads=rec.threads_per_rank
            )
        )
    return out


def _recommendation(
    model: str,
    row: InstanceRow,
    got: _Fit,
    nodes: int,
    fits: list[tuple[InstanceRow, _Fit]],
    headroom: float,
    price_source: str,
) -> Recommendation:
    plan, ppn = got["plan"], got["ppn"]
    mem_req = math.ceil(got["host_need"])
    cpu_req = max(1, math.floor(got["cpu_alloc"]) - 1)  # leave a core for daemonsets (CNI, EFA plugin, ...)
    shm = min(64, _pow2_gib(mem_req / 4))
    price = row.hourly_usd
    gpu = row.gpus > 0
    where = (
        _("{per_gpu:.1f} GiB per GPU of {gpu_gib:.0f} and ").format(
            per_gpu=plan.device_bytes / GiB, gpu_gib=row.gpu_memory_gib
        )
        if gpu
        else ""
    )
    reason = _(
        "{instance} is the smallest {families} type that holds {ppn} rank(s) x {per_rank:.1f} GiB ({where}"
        "{host:.1f} GiB host per node, +{headroom:.0%} headroom = {request} GiB) within {alloc:.0f} GiB "
        "allocatable; {nodes} node(s), world size {world}."
    ).format(
        instance=row.instance_type,
        families="/".join(sorted({f[0].family for f in fits})),
        ppn=ppn,
        per_rank=plan.total / GiB,
        where=where,
        host=plan.host_total / GiB,
        headroom=headroom,
        request=mem_req,
        alloc=got["mem_alloc"],
        nodes=nodes,
        world=plan.world_size,
    )
    return Recommendation(
        model=model,
        instance_type=row.instance_type,
        nodes=nodes,
        procs_per_node=ppn,
        cpu_request=str(cpu_req),
        memory_request=f"{mem_req}Gi",
        shm_size=f"{shm}Gi",
        hourly_cost_usd=round(price * nodes, 4) if price is not None else None,
        node_hourly_usd=price,
        reason=reason,
        instance_types=[f[0].instance_type for f in fits],
        family=row.family,
        device="gpu" if gpu else "cpu",
        gpus_per_node=row.gpus,
        threads_per_rank=max(1, row.cores // ppn),
        need_per_node_gib=round(got["host_need"], 2),
        allocatable_gib=round(got["mem_alloc"], 2),
        headroom=headroom,
        plan=plan,
        price_source=price_source,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workshop plan", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3-8b")
    parser.add_argument("--nodes", type=int, default=None, help="node count (default: the fewest that fit)")
    parser.add_argument(
        "--procs-per-node",
        type=int,
        default=None,
        help="ranks per node (default: 1 on CPU, all GPUs on GPU types)",
    )
    parser.add_argument("--zero", type=int, default=3, help="ZeRO stage 0-3")
    parser.add_argument("--offload-optimizer", action="store_true")
    parser.add_argument("--offload-param", action="store_true")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing")
    parser.add_argument(
        "--family", action="append", metavar="GLOB", help="instance families (default c7i m7i r7i)"
    )
    parser.add_argument("--headroom", type=float, default=0.2)
    parser.add_argument(
        "--efa",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="require EFA (default: only when nodes > 1)",
    )
    parser.add_argument("--source", default=None, help="catalog source: auto, aws or moto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        rec = recommend(
            args.model,
            nodes=args.nodes,
            procs_per_node=args.procs_per_node,
            families=args.family or ("c7i", "m7i", "r7i"),
            zero_stage=args.zero,
            offload_optimizer=args.offload_optimizer,
            offload_param=args.offload_param,
            micro_batch=args.micro_batch,
            seq_len=args.seq_len,
            grad_ckpt=args.grad_ckpt,
            headroom=args.headroom,
            efa=args.efa,
            source=args.source,
        )
    except WorkshopError as exc:
        return report(exc)
    plan = rec.plan
    if args.json:
        out = {
            "params": plan.params,
            "per_rank_bytes": plan.total,
            "components": plan.components,
            "placement": plan.placement,
            "host_total_bytes": plan.host_total,
            "recommendation": rec.as_dict(),
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(f"{rec.model}: {plan.params:,} parameters, ZeRO-{plan.zero_stage}, world size {plan.world_size}")
    for k, v in plan.components.items():
        print(f"  {k:<22} {v / GiB:8.2f} GiB  ({plan.placement[k]})")
    print(f"  {'per-rank total':<22} {plan.total / GiB:8.2f} GiB")
    print(
        f"-> {rec.nodes} x {rec.instance_type}, {rec.procs_per_node} rank(s)/node; pod requests cpu "
        f"{rec.cpu_request}, memory {rec.memory_request}, /dev/shm {rec.shm_size}; "
        f"${rec.hourly_cost_usd if rec.hourly_cost_usd is not None else '?'}/h on demand"
    )
    print(f"   {rec.reason}")
    print(f"   acceptable: {', '.join(rec.instance_types)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
