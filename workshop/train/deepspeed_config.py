"""The DeepSpeed config, a dict built from the run's arguments and handed to TrainingArguments (no file to
share between ranks; rank 0 writes a copy as the record), and DeepSpeed's ZeRO-3 memory stages made visible
again.
"""

from __future__ import annotations

from workshop.plan.traffic import OVERLAP_COMM
from workshop.train.args import TrainArgs


def ds_config(args: TrainArgs, backend: str = "gloo") -> dict:
    """The DeepSpeed config (a JSON-ready dict) for these arguments on `backend` (the resolved one: gloo on
    CPU, nccl on GPU); "auto" fields are filled in by the HF integration. overlap_comm is the planner's own
    (plan.traffic.OVERLAP_COMM): what it prices is what runs."""
    overlap = OVERLAP_COMM["gpu" if backend == "nccl" else "cpu"]
    zero: dict = {"stage": args.zero_stage, "contiguous_gradients": True, "overlap_comm": overlap}
    if args.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
    if args.offload_param:
        zero["offload_param"] = {"device": "cpu"}
    if (
        args.zero_stage == 3
    ):  # save_model() then writes whole 16-bit weights (from_pretrained-loadable), not shards
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    zero.update(args.extra_ds)
    cfg = {
        "bf16": {"enabled": "auto"},
        "zero_optimization": zero,
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "steps_per_print": 10**9,
        "wall_clock_breakdown": args.timers,
    }
    if args.offload_optimizer:
        # ZeRO-Offload needs DeepSpeed's own CPU Adam (a C++ op, built once and cached).
        cfg["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"},
        }
    else:
        cfg["zero_allow_untested_optimizer"] = True
    if args.sync_to:  # no shared filesystem: each node writes its own ranks' checkpoint files
        cfg["checkpoint"] = {"use_node_local_storage": True}
    return cfg


ZERO_STAGE_MESSAGES = (
    "Stage 3 initialize beginning",
    "DeepSpeedZeRoOffload initialize",
    "Before creating fp16 partitions",
    "After creating fp16 partitions",
    "Before creating fp32 partitions",
    "After creating fp32 partitions",
    "Before initializing optimizer states",
    "After initializing optimizer states",
    "After initializing ZeRO optimizer",
)


def show_zero_memory_stages() -> None:
    """Print DeepSpeed's ZeRO-3 memory stages ("MA ... GB / CPU Virtual Memory: used = ...").

    Older DeepSpeed printed them at start-up (the original workshop's log shows them); 0.19 calls the same
    function with force=False. We force just those start-up stages on, not the per-step ones.
    """
    from deepspeed.runtime import utils
    from deepspeed.runtime.zero import parameter_offload, stage3

    original = utils.see_memory_usage

    def see_memory_usage(message, force=False):
        return original(message, force=force or str(message).startswith(ZERO_STAGE_MESSAGES))

    stage3.see_memory_usage = parameter_offload.see_memory_usage = see_memory_usage
