"""The training loop, top to bottom: `run` is the order that makes ZeRO-3 work; what it calls lives in modules
named after what they do (args, distributed, deepspeed_config, model, trainer, metrics, faults).

The same program runs in a notebook's torchrun, in the multi-node network-namespace simulation, and inside
the Kubeflow TrainJob on EKS, under torchrun with any nproc/nnodes or as a plain process (one rank).
"""

from __future__ import annotations

import gc
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from workshop.plan.hardware import resolve_precision
from workshop.plan.models import PRESETS, resolve_source
from workshop.train.args import TrainArgs
from workshop.train.data import as_text, load_text, local_kit, split_held_out, tokenize_dataset
from workshop.train.deepspeed_config import ds_config, show_zero_memory_stages
from workshop.train.distributed import (
    dist_timeout,
    init_distributed,
    leave_group,
    node_local_first,
    pg_timeout,
    rank,
    resolve_backend,
    set_up_process,
    start_shm_allreduce,
)
from workshop.train.events import EventWriter
from workshop.train.faults import inject_faults
from workshop.train.guard import check_deepspeed
from workshop.train.lora import add_adapters, save_adapter, trainable_count
from workshop.train.model import load_model_and_tokenizer, parameter_count, save_final_model, weights_kind
from workshop.train.outputs import restore_latest, upload_dir
from workshop.train.shm import release_shm_buffers, resolve_allreduce


@dataclass
class Chosen:
    """What `auto` became on this machine, and why (the start line says both)."""

    backend: str
    allreduce: str  # DDP's gradient all-reduce: shm until start_allreduce finds the kernel cannot serve
    precision_why: str = "as asked"
    allreduce_why: str = "as asked"


def train(args: TrainArgs) -> dict:
    """One rank's run: the process set up before torch starts, every `auto` resolved, then `run`; however it
    ends (a guard, an exception, SIGTERM from torchrun), DeepSpeed's shared-memory buffers leave RAM."""
    set_up_process(args)
    args, chosen = resolve(args)
    try:
        with settled_heap():
            return run(args, chosen)
    finally:
        release_shm_buffers()


@contextmanager
def settled_heap():
    """The training stack imported, then its objects left out of garbage collection until the run ends.

    Starting ZeRO-3, DeepSpeed and accelerate call gc.collect() a dozen times (before each memory-stage line,
    to defragment, to clear a device cache), each a walk over the ~450,000 objects torch and transformers
    create at import: 0.3 s apiece on a 2-core machine, seconds of every run's start. The run's own objects
    are still collected, and everything is collectable again afterwards. Meant for a rank's own process: in
    a kernel that calls `train`, the objects of earlier cells are held for the run too. Where something else
    has frozen objects already, nothing is frozen or thawed here.
    """
    import workshop.train.trainer  # noqa: F401  (transformers' Trainer, most of the heap: before the freeze)

    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run(args: TrainArgs, chosen: Chosen) -> dict:
    """The core, in the order ZeRO-3 needs: the process group, TrainingArguments holding the DeepSpeed dict,
    and only then the model, which transformers builds inside deepspeed.zero.Init, so each rank only ever
    holds its 1/N of it. Then the Trainer trains, and the model and the metrics are saved."""
    # lazy: these import transformers (seconds), and `import workshop.train` must stay cheap for the launchers
    from transformers.trainer_utils import get_last_checkpoint

    from workshop.train.metrics import RunState, record_run
    from workshop.train.trainer import build_trainer, training_arguments

    init_distributed(args, chosen.backend)  # 1. else accelerate starts a group that DeepSpeed never sees
    args, chosen = start_allreduce(args, chosen)
    out, cache_dir = prepare_output(args)
    ds = ds_config(args, chosen.backend) if args.engine == "deepspeed" else None
    if ds and rank() == 0:  # a record of what ran; the ranks get the dict itself, no file to share
        (out / "ds_config.json").write_text(json.dumps(ds, indent=2))
    targs = training_arguments(args, chosen.backend, ds)  # 2. the DeepSpeed dict goes to TrainingArguments
    model, tok = load_model_and_tokenizer(args, cache_dir)  # 3. after it: under ZeRO-3, built partitioned
    if args.method == "lora":  # adapters on the frozen (already partitioned) weights
        model = add_adapters(args, model)
    data, held_out = training_data(args, tok, targs, cache_dir)
    state = RunState()
    events = EventWriter(out) if args.tensorboard and rank() == 0 else None
    trainer = build_trainer(args, targs, model, tok, data, state, held_out, events)  # 4. the Trainer
    resume_from = get_last_checkpoint(str(out)) if args.resume and out.is_dir() else None
    announce(args, chosen, len(data), resume_from, held_out=len(held_out) if held_out else 0, model=model)
    if args.engine == "deepspeed" and args.zero_stage == 3:
        show_zero_memory_stages()
    inject_faults()  # only when a WORKSHOP_*_AT variable asks for one (the fault tests)
    try:
        trainer.train(resume_from_checkpoint=resume_from)  # 5. train
    finally:
        if events:
            events.close()
    final = save(args, trainer, out, tok) if args.save_model else None  # 6. save
    if args.sync_to and rank() == 0:
        for folder in ([final] if final else []) + ([events.dir] if events else []):
            upload_dir(folder, args.sync_to)
    result = record_run(
        args,
        state,
        model,
        global_step=trainer.state.global_step,
        backend=chosen.backend,
        precision_why=chosen.precision_why,
        resumed_from=resume_from,
        final=final,
        eval_samples=len(held_out) if held_out else 0,
    )
    leave_group()
    return result


def resolve(args: TrainArgs) -> tuple[TrainArgs, Chosen]:
    """The backend, the precision and the all-reduce this machine gets for `auto`. The returned args carry the
    precision; --allreduce stays as asked until start_allreduce, which needs the group."""
    backend = resolve_backend(args.backend)
    precision, precision_why = resolve_precision(args.precision)
    args = replace(args, precision=precision)
    if args.engine == "deepspeed":
        check_deepspeed(backend, args.zero_stage)
    allreduce, allreduce_why = resolve_allreduce(args.allreduce, engine=args.engine, backend=backend)
    return args, Chosen(backend, allreduce, precision_why, allreduce_why)


def start_allreduce(args: TrainArgs, chosen: Chosen) -> tuple[TrainArgs, Chosen]:
    """DDP's gradient all-reduce as it will run: DeepSpeed's shared-memory kernel started, or the backend's
    where it cannot serve (and why); the args then carry it."""
    allreduce, why = chosen.allreduce, chosen.allreduce_why
    if allreduce == "shm":
        allreduce, why = start_shm_allreduce(args, why)
    return replace(args, allreduce=allreduce), replace(chosen, allreduce=allreduce, allreduce_why=why)


def prepare_output(args: TrainArgs) -> tuple[Path, Path]:
    """The output folder, the local kit for a preset and, for a restarted job, its newest checkpoint back from
    S3: on each node's local rank 0 first."""
    out, cache_dir = Path(args.output_dir), Path(args.cache_dir).expanduser()

    def prepare():
        out.mkdir(parents=True, exist_ok=True)
        if args.model in PRESETS:
            local_kit(cache_dir)
        if args.sync_to and args.resume:  # a restarted job: the newest complete checkpoint back from S3
            restore_latest(args.sync_to, out)

    node_local_first(prepare)
    return out, cache_dir


def training_data(args: TrainArgs, tok, targs, cache_dir: Path):
    """(training blocks, held-out blocks or None): the dataset's rows as text (a column, or chat messages
    through the tokenizer's template), the held-out rows set aside (--eval-fraction, or the dataset's own
    --eval-split), each tokenized once per node (the main process first, the others then read its cache)."""

    def blocks(rows):
        return tokenize_dataset(
            as_text(rows, tok, column=args.text_column, chat=args.chat),
            tok,
            seq_len=args.seq_len,
            packing=args.packing,
            min_chars=args.min_chars,
        )

    with targs.main_process_first(desc="tokenize"):
        rows, held_out = split_held_out(load_text(args.dataset, cache_dir), args.eval_fraction, args.seed)
        if args.eval_split:
            held_out = load_text(args.dataset, cache_dir, split=args.eval_split)
        return blocks(rows), (blocks(held_out) if held_out is not None else None)


def save(args: TrainArgs, trainer, out: Path, tok) -> Path:
    """The final model (full fine-tuning), or the adapter with, for a preset, its frozen base and, with
    --merge, the merged model (LoRA)."""
    if args.method != "lora":
        return save_final_model(trainer, out)
    base = None if args.model in PRESETS else resolve_source(args.model).name
    return save_adapter(trainer, out, tok, base=base, merge=args.merge)


def announce(
    args: TrainArgs, chosen: Chosen, samples: int, resume_from: str | None, *, held_out: int = 0, model=None
) -> None:
    """Rank 0's start line: what every `auto` became and why, and the group's real timeout; with LoRA, the
    parameters that train."""
    import torch
    import torch.distributed as dist

    if dist.get_rank() != 0:
        return
    if args.method == "lora" and model is not None:
        n, total = trainable_count(model), parameter_count(model)
        print(
            f"workshop.train: LoRA r={args.lora_rank} alpha={args.lora_alpha:g} targets={args.lora_targets}: "
            f"trainable parameters {n:,} of {total:,} ({100 * n / total:.2f} %)",
            flush=True,
        )
    print(
        f"workshop.train: world_size={dist.get_world_size()} backend={chosen.backend} engine={args.engine} "
        f"zero={args.zero_stage} precision={args.precision} ({chosen.precision_why}) "
        f"weights={weights_kind(args)} "
        f"dist_timeout={(pg_timeout() or dist_timeout(args)).total_seconds() / 60:g}min "
        + (f"allreduce={args.allreduce} ({chosen.allreduce_why}) " if args.engine == "ddp" else "")
        + f"method={args.method} threads/rank={torch.get_num_threads()} samples={samples} "
        + (f"eval_samples={held_out} " if held_out else "")
        + f"cpu_capability={torch.backends.cpu.get_cpu_capability()} "
        f"global_batch={dist.get_world_size() * args.micro_batch * args.grad_accum * args.seq_len} "
        f"tokens/step steps={args.max_steps}"
        + (f" plan: {os.environ['WORKSHOP_PLAN']}" if os.environ.get("WORKSHOP_PLAN") else "")
        + (f" resuming from {resume_from}" if resume_from else ""),
        flush=True,
    )


def record_rank_errors(fn):
    """torch.elastic's @record: an uncaught exception in a rank is written to torchrun's error file, so its
    summary (and workshop.launch.torchrun, which reads it) shows the rank's own traceback, not only an exit
    code."""
    try:
        from torch.distributed.elastic.multiprocessing.errors import record
    except ImportError:  # torch without the elastic package: the plain traceback still reaches the log
        return fn
    return record(fn)
