"""ZeRO stages 1, 2 and 3 side by side: what each shards, what a rank keeps, and what it sends per step.

The memory column is chapter 01's planner (workshop.plan.memory), the traffic column chapter 06's model
(workshop.plan.traffic): one table, so the trade is visible in one place. Each stage shards one more kind of
state and pays for it in traffic: stage 1 the optimizer state (fp32 master + Adam moments), stage 2 also the
gradients, stage 3 also the parameters, which it must then all-gather for every forward and backward.
"""

from __future__ import annotations

from workshop.errors import check_choice
from workshop.lang import N_, _
from workshop.plan.memory import DTYPES, GiB, plan_memory
from workshop.plan.models import SEQ_LEN
from workshop.plan.traffic import zero_traffic

SHARDS = {
    0: N_("nothing (plain data parallel: every rank keeps everything)"),
    1: N_("optimizer state (fp32 master + Adam moments)"),
    2: N_("optimizer state + gradients"),
    3: N_("optimizer state + gradients + parameters"),
}


def stages(
    model: str = "llama-3-8b",
    world: int = 4,
    *,
    grad_accum: int = 1,
    grad_ckpt: bool = False,
    micro_batch: int = 1,
    seq_len: int = SEQ_LEN,
    dtype: str = "bf16",
) -> list[dict]:
    """One row per ZeRO stage 0-3: model-state GiB per rank (planner) and GB sent per rank per step
    (model)."""

    check_choice("dtype", dtype, DTYPES)
    rows = []
    for stage in (0, 1, 2, 3):
        plan = plan_memory(
            model,
            world_size=world,
            zero_stage=stage,
            micro_batch=micro_batch,
            seq_len=seq_len,
            grad_ckpt=grad_ckpt,
            dtype=dtype,
        )
        c = plan.components
        states = c["params"] + c["grads"] + c["master_fp32"] + c["adam_moments"]
        t = zero_traffic(
            plan.params,
            world,
            stage,
            grad_accum=grad_accum,
            bytes_per_param=DTYPES[dtype],
            grad_ckpt=grad_ckpt,
        )
        rows.append(
            {
                "stage": stage,
                "shards": SHARDS[stage],
                "states_gib_per_rank": round(states / GiB, 2),
                "peak_gib_per_rank": round(plan.total / GiB, 2),
                "all_reduce_gb": round(t.all_reduce / 1e9, 2),
                "reduce_scatter_gb": round(t.reduce_scatter / 1e9, 2),
                "all_gather_gb": round(t.all_gather / 1e9, 2),
                "sent_gb_per_step": round(t.collective / 1e9, 2),
            }
        )
    return rows


def bytes_by_transport(
    model: str = "llama-3-8b", world: int = 4, *, grad_accum: int = 1, grad_ckpt: bool = False
) -> str:
    """ZeRO-3's bytes per rank for one job, per transport, and why they differ: the one sentence chapter 04
    (the stage table's "sent GB/step") and chapter 01 (the cost planner's gloo figure) both stand on."""
    params = plan_memory(model, world_size=world, zero_stage=3, grad_ckpt=grad_ckpt).params
    nccl = zero_traffic(params, world, 3, grad_accum=grad_accum, grad_ckpt=grad_ckpt)
    gloo = zero_traffic(
        params, world, 3, grad_accum=grad_accum, grad_ckpt=grad_ckpt, reduce_scatter_as_all_reduce=True
    )
    per = (
        _("per optimizer step ({n} micro-steps)").format(n=grad_accum)
        if grad_accum > 1
        else _("per step (one micro-step)")
    )
    return _(
        "ZeRO-3, {model}, {world} ranks: each rank sends {nccl:.1f} GB {per} where reduce-scatter is its own "
        "collective (NCCL: all-gathers {ag:.1f} + reduce-scatter {rs:.1f}), and {gloo:.1f} GB over gloo, "
        "which runs reduce-scatter as an all-reduce (twice its bytes: {grs:.1f} GB)"
    ).format(
        model=model,
        world=world,
        nccl=nccl.collective / 1e9,
        per=per,
        ag=nccl.all_gather / 1e9,
        rs=nccl.reduce_scatter / 1e9,
        gloo=gloo.collective / 1e9,
        grs=gloo.reduce_scatter / 1e9,
    )


def format_stages(rows: list[dict]) -> str:
    """stages()'s rows as chapter 04's table: model states and peak in GiB per rank, each collective's and the
    total GB sent per rank per optimizer step, and what the stage shards."""
    head = (
        f"{'stage':5s} {'states GiB/rank':>15s} {'peak GiB/rank':>13s} {'all-reduce':>10s} "
        f"{'red.-scatter':>12s} "
        f"{'all-gather':>10s} {'sent GB/step':>12s}  shards"
    )
    return "\n".join(
        [
            head,
            *(
                f"{r['stage']:5d} {r['states_gib_per_rank']:15.2f} {r['peak_gib_per_rank']:13.2f} "
                f"{r['all_reduce_gb']:10.2f} {r['reduce_scatter_gb']:12.2f} {r['all_gather_gb']:10.2f} "
                f"{r['sent_gb_per_step']:12.2f}  {_(r['shards'])}"
                for r in rows
            ),
        ]
    )


# What each key of the DeepSpeed config the entry point writes (workshop.train.ds_config) does, keyed by its
# path. A test renders the config for several TrainArgs and requires an entry for every key, so this cannot go
# stale silently.
CONFIG_KEYS = {
    "bf16": N_("mixed precision section"),
    "bf16.enabled": N_(
        "'auto': the HF integration turns it on when TrainingArguments(bf16=True), i.e. precision bf16"
    ),
    "zero_optimization": N_("the ZeRO section"),
    "zero_optimization.stage": N_("0-3: what is sharded (the table above)"),
    "zero_optimization.contiguous_gradients": N_(
        "copy gradients into one flat buffer as they are produced: "
        "fewer, larger reduce-scatters and less fragmentation"
    ),
    "zero_optimization.overlap_comm": N_(
        "run the gathers and reduce-scatters on their own streams, beside compute: on for GPUs (NCCL), off "
        "on CPU, where the same cores compute and communicate; the planner prices the same "
        "(workshop.plan.traffic.OVERLAP_COMM)"
    ),
    "zero_optimization.offload_optimizer": N_(
        "keep the optimizer state in host memory and step it with "
        "DeepSpeed's CPU Adam (for GPUs; on a CPU it only adds copies)"
    ),
    "zero_optimization.offload_optimizer.device": N_("'cpu' (or 'nvme')"),
    "zero_optimization.offload_param": N_(
        "keep the parameter partitions in host memory between uses (ZeRO-3 only)"
    ),
    "zero_optimization.offload_param.device": N_("'cpu' (or 'nvme')"),
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": N_(
        "on save, gather the partitions into whole 16-bit weights that from_pretrained can load"
    ),
    "zero_optimization.stage3_param_persistence_threshold": N_(
        "parameters smaller than this stay whole on every rank (not worth a gather)"
    ),
    "zero_optimization.stage3_prefetch_bucket_size": N_(
        "elements fetched ahead of use per all-gather bucket"
    ),
    "zero_optimization.stage3_max_live_parameters": N_("most gathered elements kept alive at once"),
    "gradient_accumulation_steps": N_("'auto': from TrainingArguments (micro-steps per optimizer step)"),
    "gradient_clipping": N_("'auto': TrainingArguments.max_grad_norm"),
    "train_batch_size": N_("'auto': micro-batch x accumulation x world size"),
    "train_micro_batch_size_per_gpu": N_(
        "'auto': the per-rank micro-batch (a CPU rank counts as a 'gpu' here)"
    ),
    "steps_per_print": N_("DeepSpeed's own progress print, silenced: the entry point prints METRIC lines"),
    "wall_clock_breakdown": N_("per-phase timers (forward/backward/step); off, they add synchronisation"),
    "zero_allow_untested_optimizer": N_(
        "let ZeRO wrap the HF Trainer's torch AdamW (DeepSpeed calls it untested)"
    ),
    "optimizer": N_("DeepSpeed's own optimizer section (needed for CPU Adam with optimizer offload)"),
    "optimizer.type": N_("AdamW, implemented by DeepSpeed's CPU Adam when offloaded"),
    "optimizer.params": N_("'auto' values from TrainingArguments"),
    "optimizer.params.lr": N_("'auto': TrainingArguments.learning_rate"),
    "optimizer.params.betas": N_("'auto': adam_beta1/adam_beta2"),
    "optimizer.params.eps": N_("'auto': adam_epsilon"),
    "optimizer.params.weight_decay": N_("'auto': weight_decay"),
    "checkpoint": N_("checkpoint options"),
    "checkpoint.use_node_local_storage": N_(
        "each node writes its own ranks' files (no shared filesystem; S3 sync)"
    ),
}


def _paths(cfg: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for k, v in cfg.items():
        path = f"{prefix}{k}"
        out.append((path, v))
        if isinstance(v, dict):
            out += _paths(v, path + ".")
    return out


def explain_config(cfg: dict) -> str:
    """The DeepSpeed config, one line per key: its value and what it does (unexplained keys are named)."""
    lines = []
    for path, value in _paths(cfg):
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        lines.append(
            f"{'  ' * path.count('.')}{path.rsplit('.', 1)[-1]}{shown}  # "
            + _(CONFIG_KEYS.get(path, N_("(not explained: add it to workshop.plan.zero.CONFIG_KEYS)")))
        )
    return "\n".join(lines)
