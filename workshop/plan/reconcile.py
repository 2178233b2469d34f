"""One memory story, three sources: the planner's per-rank bytes, DeepSpeed's own estimator and the original
workshop's ZeRO-3 log, term by term (chapter 01's tables, chapter 04's reading of the log).
"""

from __future__ import annotations

from typing import TypedDict

from workshop.lang import N_, _
from workshop.plan.memory import GiB, MemoryPlan, RunSpec, plan_memory
from workshop.plan.models import architecture

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
    """The planner's cumulative stages beside the original workshop's measured ZeRO-3 log: one StageRow per
    stage, GiB per rank, and the difference in %."""
    plan = plan_memory(**ORIGINAL_RUN)
    rows: list[StageRow] = []
    for label, planned in plan.stages():
        original = ORIGINAL_STAGES_GIB.get(label)
        gib = planned / GiB
        rows.append(
            {
                "stage": _(label),  # DeepSpeed's own log lines stay as it prints them
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
            _("{term} ({bpp} B x {params:.2f} B parameters / {world} ranks = {gib:.2f} GiB)").format(
                term=term[0],
                bpp=term[1],
                params=plan.params / 1e9,
                world=plan.world_size,
                gib=plan.components.get(term[0], 0) / GiB,
            )
            if term
            else _("allocator copies (the flat buffers of the bf16 shards)")
        )
        out.append(f"{line}: {gib:.2f} GiB ({delta}) = {what}")
        prev = gib
    moments = next(line for term, _b, _ds, line in RECONCILE_TERMS if term == "adam_moments")
    out.append(
        _(
            "adam_moments ({gib:.2f} GiB per rank): {moments}, after every line above (planner: {after:.2f} "
            "GiB after it)"
        ).format(
            gib=plan.components["adam_moments"] / GiB,
            moments=_(moments),
            after=dict(plan.stages())["After the first step (Adam moments)"] / GiB,
        )
    )
    return out


def format_reconcile(r: Reconciliation) -> str:
    """The reconciliation as the table (bytes per parameter, GiB per rank) and the lines chapter 01 prints."""
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
