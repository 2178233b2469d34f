"""What the Hugging Face Trainer is given: its TrainingArguments, the Trainer subclass that counts useful
tokens, the callbacks, and the master-weights optimizer for DDP with bf16.

TrainingArguments is where the DeepSpeed dict enters (before the model exists) and where every flag becomes a
Trainer setting: `trainer_settings` maps them in one pure function, checked without a process group (building
TrainingArguments itself starts accelerate's device state, which needs one).
"""

from __future__ import annotations

import math
from pathlib import Path

from transformers import Trainer, TrainingArguments

from workshop.train.args import TrainArgs
from workshop.train.distributed import dist_timeout
from workshop.train.guard import NumericsGuard
from workshop.train.master_weights import with_master_weights
from workshop.train.metrics import MetricsCallback, RunState
from workshop.train.model import ddp_masters
from workshop.train.outputs import sync_callback
from workshop.train.shm import register_shm_allreduce
from workshop.train.threads import ThreadSchedule, threads_by_step

MAX_GRAD_NORM = 1.0  # gradient clipping, the HF Trainer's default


def checkpointing_keyword() -> str:
    """transformers 5.23 renamed TrainingArguments(gradient_checkpointing=) to activation_checkpointing=."""
    fields = TrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"


def trainer_settings(args: TrainArgs, backend: str, ds: dict | None) -> dict:
    """TrainingArguments' keywords for these arguments, with the DeepSpeed dict `ds` (None: DDP): a plain
    dict, because TrainingArguments itself sets up accelerate's device state, which needs the process
    group."""
    masters = ddp_masters(args)  # the master-weights optimizer casts instead of autocast
    return dict(
        output_dir=str(Path(args.output_dir)),
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.grad_accum,
        max_steps=args.max_steps,
        learning_rate=args.lr,
        warmup_steps=args.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="steps" if args.save_steps else "no",
        save_steps=args.save_steps or 500,
        bf16=args.precision == "bf16" and not masters,
        use_cpu=backend == "gloo",
        ddp_backend=backend,
        deepspeed=ds,
        **{checkpointing_keyword(): args.grad_ckpt},
        seed=args.seed,
        report_to="none",
        disable_tqdm=True,
        dataloader_drop_last=True,
        optim=args.optimizer,
        torch_compile=args.compile,
        save_only_model=False,
        save_total_limit=args.save_total_limit,
        max_grad_norm=0.0 if masters else MAX_GRAD_NORM,  # the master-weights optimizer clips in its own pass
        ddp_bucket_cap_mb=args.ddp_bucket_mb,
        ddp_find_unused_parameters=False,  # a Llama uses every weight
        # transformers 5.23 hands this to accelerate's PartialState only when it starts the group itself (GPU
        # paths, not use_cpu), and accelerate skips that when a group exists, as it does here
        # (init_distributed): the same value in seconds keeps the record (training_args.bin) and any such path
        # in agreement
        ddp_timeout=math.ceil(dist_timeout(args).total_seconds()),
        # the held-out split: every rank evaluates its shard, the Trainer reduces the losses; only the loss
        # (gathering logits would hold batch x seq x vocab per rank)
        eval_strategy="steps" if args.eval_steps else "no",
        eval_steps=args.eval_steps or None,
        per_device_eval_batch_size=args.micro_batch,
        prediction_loss_only=True,
    )


def training_arguments(args: TrainArgs, backend: str, ds: dict | None) -> TrainingArguments:
    """The Trainer's settings, the DeepSpeed dict among them: built after the process group, before the
    model."""
    return TrainingArguments(**trainer_settings(args, backend, ds))


class CountingTrainer(Trainer):
    """Counts useful (non-pad) tokens exactly where the model sees them, and puts the shared-memory all-reduce
    on DDP at the first step (DDP exists from then on)."""

    def __init__(self, *args, run_state: RunState, shm_allreduce: bool = False, **kwargs):
        self.run_state, self.shm_allreduce = run_state, shm_allreduce
        super().__init__(*args, **kwargs)

    def compute_loss(self, model, inputs, *a, **kw):
        if model.training:  # the held-out batches are not training tokens
            self.run_state.tokens += int(inputs["attention_mask"].sum())
        return super().compute_loss(model, inputs, *a, **kw)

    def training_step(self, model, inputs, *a, **kw):
        state = self.run_state
        if self.shm_allreduce and state.allreduce_hooked is None:
            state.allreduce_hooked = register_shm_allreduce(model, average=state.average_in_allreduce)
            if not state.allreduce_hooked:
                raise RuntimeError(
                    f"--allreduce shm: the model the Trainer trains is not DDP ({type(model)})"
                )
        return super().training_step(model, inputs, *a, **kw)


class MasterWeightsTrainer(CountingTrainer):
    """The same, for the master-weights optimizer, which measures the gradient norm in its own pass."""

    def _get_grad_norm(self, model, grad_norm=None):
        """transformers >= 5.x measures the norm again (a pass over every gradient, multiplied by 1.0)
        when its own clipping is off; the master-weights optimizer measures it in its pass."""
        return grad_norm


def master_weights_optimizer(args: TrainArgs, targs: TrainingArguments, model, world: int, state: RunState):
    """(optimizer class, kwargs) for Trainer(optimizer_cls_and_kwargs=): the Trainer's own optimizer wrapped
    to step fp32 masters of the bf16 model."""
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(targs, model)
    # --compile and the fused AdamW: one compiled pass per tensor clips, casts, steps and rounds; the
    # all-reduce then only sums, and dividing by N rides along in that pass
    fused_step = args.compile and args.optimizer == "adamw_torch_fused"
    divisor = world if fused_step and args.allreduce == "shm" else 1
    state.average_in_allreduce = divisor == 1
    masters = with_master_weights(
        cls, compiled_step=fused_step, max_grad_norm=MAX_GRAD_NORM, grad_divisor=divisor
    )
    return masters, kwargs


def build_trainer(
    args: TrainArgs, targs: TrainingArguments, model, tok, data, state: RunState, held_out=None, sink=None
) -> CountingTrainer:
    """The Trainer for this run: its callbacks (metrics and the numerics guard, the S3 sync) and, for DDP with
    bf16 master weights, the optimizer that keeps them. `held_out`: the evaluation blocks (None: none);
    `sink`: rank 0's writer of each step's record (TensorBoard)."""
    import torch.distributed as dist

    state.eval_at_end = held_out is not None
    callbacks = [MetricsCallback(state, NumericsGuard(args.max_grad_jump), sink)]
    if args.sync_to:
        callbacks.append(sync_callback(args.sync_to, args.save_total_limit))
    if counts := threads_by_step():  # a thread sweep in one launch (workshop.launch.torchrun.sweep_threads)
        callbacks.append(ThreadSchedule(counts, state))
    optimizer, cls = None, CountingTrainer
    if ddp_masters(args):
        optimizer = master_weights_optimizer(args, targs, model, dist.get_world_size(), state)
        cls = MasterWeightsTrainer
    return cls(
        model=model,
        args=targs,
        train_dataset=data,
        eval_dataset=held_out,
        processing_class=tok,
        callbacks=callbacks,
        optimizer_cls_and_kwargs=optimizer,
        run_state=state,
        shm_allreduce=args.allreduce == "shm",
    )
