"""The ONE training entry point: `python -m workshop.train` (== `workshop train`).

The same program runs in a notebook's torchrun, in the multi-node network-namespace simulation, and inside
the Kubeflow TrainJob on EKS. It works under torchrun with any nproc/nnodes AND as a plain process (it then
sets up a one-rank process group itself, so DeepSpeed never hits `KeyError: 'LOCAL_RANK'`).

Rank 0 prints one `METRIC {...}` JSON line per optimizer step (loss, useful tokens/s, step time, RSS of
every rank) and writes `<output-dir>/metrics.json` at the end; the DeepSpeed config it used is written to
`<output-dir>/ds_config.json`.
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import sys
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

from workshop.errors import (
    WorkshopError,
    report,
)
from workshop.plan.hardware import resolve_precision
from workshop.plan.models import PRESETS, build_config, check_hub_access, hub_token, resolve_source
from workshop.train.affinity import pin_rank
from workshop.train.args import TrainArgs, parse_args
from workshop.train.data import load_text, load_tokenizer, local_kit, tokenize_dataset
from workshop.train.dsprobe import probe_deepspeed_ops, use_versioned_extensions_dir
from workshop.train.guard import NumericsGuard, check_deepspeed, versions
from workshop.train.logs import METRIC_PREFIX
from workshop.train.master_weights import with_master_weights
from workshop.train.outputs import restore_latest, sync_callback, upload_dir
from workshop.train.shm import (
    register_shm_allreduce,
    release_shm_buffers,
    resolve_allreduce,
    shm_kernel_handles,
    start_shm_kernel,
)

MAX_GRAD_NORM = 1.0  # gradient clipping, the HF Trainer's default


# ---------------------------------------------------------------- distributed set-up

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_process_env() -> None:
    """Make a plain `python -m workshop.train` look like a one-rank torchrun, for DeepSpeed's sake.

    DeepSpeed reads RANK/LOCAL_RANK/WORLD_SIZE from the environment; its CPU shared-memory collective
    reads LOCAL_SIZE, which torchrun does not set (it sets LOCAL_WORLD_SIZE), and crashes without it.
    """
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    os.environ.setdefault("LOCAL_SIZE", os.environ.get("LOCAL_WORLD_SIZE", "1"))


def resolve_backend(backend: str) -> str:
    import torch

    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and not torch.cuda.is_available():
        raise WorkshopError("backend 'nccl' needs CUDA GPUs and none is visible; use --backend gloo (or auto)")
    return backend


def dist_timeout(args: TrainArgs) -> timedelta:
    """--dist-timeout-min as the timedelta torch.distributed and DeepSpeed take."""
    return timedelta(minutes=args.dist_timeout_min)


def init_distributed(args: TrainArgs, backend: str) -> None:
    """Start the process group BEFORE TrainingArguments/model: with HF Trainer on CPU, accelerate would
    otherwise start torch.distributed without DeepSpeed, and ZeRO-3 would see world size 1.

    The timeout goes in explicitly: DeepSpeed's default is 10 minutes (or $DEEPSPEED_TIMEOUT), torch's for a
    bare gloo group 30; --dist-timeout-min is then the one value every engine and backend uses."""
    import torch.distributed as dist

    if args.engine == "deepspeed":
        import deepspeed


        use_versioned_extensions_dir()
        probe_deepspeed_ops()  # before DeepSpeed's own probe, which prints linker errors in notebooks
        deepspeed.init_distributed(dist_backend=backend, timeout=dist_timeout(args))
    elif not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=dist_timeout(args))


def pg_timeout() -> timedelta | None:
    """The timeout the default process group really has (None when there is none, or torch hides it): read
    from its backend's options (`ProcessGroup._get_backend(device).options._timeout`, torch 2.x; gloo on
    CPU, NCCL on CUDA), so the start line shows what the group got, not what was asked."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    group = dist.group.WORLD
    for device in ("cpu", "cuda"):
        try:
            if torch.device(device) in group._device_types:
                return group._get_backend(torch.device(device)).options._timeout
        except (AttributeError, RuntimeError):
            continue
    return None


def ds_config(args: TrainArgs) -> dict:
    """The DeepSpeed JSON for these arguments; "auto" fields are filled in by the HF integration."""
    zero: dict = {"stage": args.zero_stage, "contiguous_gradients": True, "overlap_comm": False}
    if args.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
    if args.offload_param:
        zero["offload_param"] = {"device": "cpu"}
    if args.zero_stage == 3:  # save_model() then writes whole 16-bit weights (from_pretrained-loadable), not shards
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
        "wall_clock_breakdown": False,
    }
    if args.offload_optimizer:
        # ZeRO-Offload needs DeepSpeed's own CPU Adam (a C++ op, built once and cached).
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                         "weight_decay": "auto"}}
    else:
        cfg["zero_allow_untested_optimizer"] = True
    if args.sync_to:  # no shared filesystem: each node writes its own ranks' checkpoint files
        cfg["checkpoint"] = {"use_node_local_storage": True}
    return cfg


# ---------------------------------------------------------------- metrics

def rss_gb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


def _gather(value):
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [value]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def make_callback(state: dict, guard: NumericsGuard | None = None):
    from transformers import TrainerCallback

    class MetricsCallback(TrainerCallback):
        """Per optimizer step: step time, useful tokens/s over all ranks, every rank's RSS (rank 0 prints)."""

        def on_train_begin(self, args, st, control, **kw):
            state["t_last"] = time.perf_counter()
            state["t0"] = state["t_last"]

        def on_step_end(self, args, st, control, **kw):
            now = time.perf_counter()
            tokens = sum(_gather(state.pop("tokens", 0)))
            rss = [round(r, 3) for r in _gather(rss_gb())]
            dt = now - state["t_last"]
            state["t_last"] = now
            state["pending"] = {"step": st.global_step, "step_time_s": round(dt, 4), "tokens": tokens,
                                "tokens_per_s": round(tokens / dt, 1) if dt > 0 else None, "rss_gb": rss,
                                "elapsed_s": round(now - state["t0"], 2)}

        def on_log(self, args, st, control, logs=None, **kw):
            rec = state.pop("pending", None)
            if rec is None or not logs or "loss" not in logs:
                return
            grad_norm = logs.get("grad_norm")
            if grad_norm is None:  # the master-weights optimizer clips, so it knows the norm (workshop.train.master_weights)
                opt = kw.get("optimizer")
                grad_norm = getattr(getattr(opt, "optimizer", opt), "last_grad_norm", None)
            grad_norm = None if grad_norm is None else float(grad_norm)
            rec.update(loss=round(float(logs["loss"]), 4), lr=logs.get("learning_rate"),
                       grad_norm=None if grad_norm is None else float(f"{grad_norm:.6g}"))
            state["steps"].append(rec)
            if st.is_world_process_zero:
                print(METRIC_PREFIX + json.dumps(rec), flush=True)
            if guard is not None:  # every rank sees the same (all-reduced) loss and norm, so all stop together
                guard.check(rec["step"], float(logs["loss"]), grad_norm)

    return MetricsCallback()


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def summarize(steps: list[dict], **extra) -> dict:
    """metrics.json: the per-step records plus medians that skip the first (warm-up) step."""
    steady = steps[1:] or steps
    return {
        "steps": steps,
        "first_loss": steps[0]["loss"] if steps else None,
        "final_loss": steps[-1]["loss"] if steps else None,
        "tokens_per_s_median": _median([s["tokens_per_s"] for s in steady]),
        "step_time_s_median": _median([s["step_time_s"] for s in steady]),
        **extra,
    }


# ---------------------------------------------------------------- model and data

def load_model_and_tokenizer(args: TrainArgs, cache_dir: Path):
    """Preset: its architecture with RANDOM weights and the local tokenizer (offline lessons). Hub id or
    local directory: the model's own weights and tokenizer via from_pretrained (fine-tuning).

    Must run after TrainingArguments(deepspeed=...) exists: transformers then builds the model inside
    deepspeed.zero.Init, so under ZeRO-3 each rank only ever holds its 1/N partition.
    """
    import torch
    from transformers import AutoModelForCausalLM


    dtype = torch.bfloat16 if args.precision == "bf16" and (args.engine == "deepspeed" or args.master_weights) \
        else torch.float32
    source = resolve_source(args.model)
    if source.kind == "preset":
        vocab = PRESETS[args.model].config["vocab_size"]
        _, tok = local_kit(cache_dir, vocab_size=min(vocab, 8192))
        config = build_config(args.model, vocab_size=max(vocab, len(tok)), bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=args.attn_implementation)
    else:
        token = hub_token()  # from the Kubernetes Secret in the TrainJob; never logged
        if source.kind == "hub":
            check_hub_access(source.name, token)  # gated / missing / not cached: plain words, before any weights
        tok = load_tokenizer(source.name, token=token)
        model = AutoModelForCausalLM.from_pretrained(source.name, dtype=dtype, token=token,
                                                     attn_implementation=args.attn_implementation)
        if args.lr >= 1e-4 and int(os.environ.get("RANK", "0")) == 0:
            print(f"workshop.train: warning: lr {args.lr:g} on pretrained weights; fine-tuning uses ~2e-5 "
                  "(workshop.plan.models.FINETUNE), a from-scratch lr can wreck them in a few steps", flush=True)
    if args.grad_ckpt:
        model.config.use_cache = False
    return model, tok


def save_final_model(trainer, out: Path) -> Path:
    """The trained model, loadable with from_pretrained: every rank takes part (ZeRO-3 gathers the 16-bit
    weights onto rank 0, `stage3_gather_16bit_weights_on_model_save`), rank 0 writes. Written under a
    temporary name and renamed, so a `final/` directory is always complete."""
    import torch.distributed as dist

    final, tmp = out / "final", out / ".final.partial"
    trainer.save_model(str(tmp))
    dist.barrier()
    if dist.get_rank() == 0:
        import shutil

        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    dist.barrier()
    return final


def _node_local_first(fn):
    """Run fn on each node's local rank 0 first, then on nobody else until it is done.

    Nodes of a TrainJob do not share a filesystem, so "global rank 0 writes, everyone reads" breaks on the
    second node: every node prepares its own copy (writes are atomic, so a shared volume is safe too).
    """
    import torch.distributed as dist

    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        fn()
    dist.barrier()


# ---------------------------------------------------------------- main

def train(args: TrainArgs) -> dict:
    ensure_process_env()
    _stop_on_sigterm()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.pin_cores:  # before torch starts: OpenMP binds its threads to the affinity it finds at start-up

        pin_rank(args.threads)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    backend = resolve_backend(args.backend)
    from dataclasses import replace


    precision, precision_why = resolve_precision(args.precision)
    args = replace(args, precision=precision)
    if args.engine == "deepspeed":
        check_deepspeed(backend, args.zero_stage)
    allreduce, allreduce_why = resolve_allreduce(args.allreduce, engine=args.engine, backend=backend)
    init_distributed(args, backend)
    try:
        if allreduce == "shm":
            allreduce, allreduce_why = _start_shm_allreduce(args, allreduce_why)
        return _train(replace(args, allreduce=allreduce), backend, precision_why, allreduce_why)
    finally:  # whatever way the run ends (a guard, an exception, SIGTERM from torchrun): nothing left in RAM
        release_shm_buffers()


def grad_dtype(args: TrainArgs):
    """The dtype DDP all-reduces: bf16 when the model itself is bf16 (master weights), else fp32 (autocast keeps
    fp32 weights, so their gradients are fp32 too)."""
    import torch

    return torch.bfloat16 if args.precision == "bf16" and args.master_weights else torch.float32


def _start_shm_allreduce(args: TrainArgs, why: str) -> tuple[str, str]:
    """Load DeepSpeed's shared-memory kernel; where it cannot serve, auto falls back to the backend (and says
    why), an explicit --allreduce shm stops with the reason."""

    problem = start_shm_kernel()
    if problem is None and not shm_kernel_handles(grad_dtype(args)):
        problem = f"this CPU lacks the vector instructions DeepSpeed's {grad_dtype(args)} reduce kernel needs"
    if problem is None:
        return "shm", why
    if args.allreduce == "shm":
        raise WorkshopError(f"--allreduce shm: {problem}; allowed here: auto or backend")
    return "backend", problem


def _stop_on_sigterm() -> None:
    """torchrun SIGTERMs the surviving ranks when one fails; turn that into SystemExit so `finally` runs."""
    import signal

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def weights_kind(args: TrainArgs) -> str:
    """How the weights are kept, in words for the start line: what --precision and --master-weights became."""
    if args.precision != "bf16":
        return "fp32"
    if args.engine == "deepspeed" or args.master_weights:
        return "bf16+fp32-master"
    return "fp32+bf16-autocast"


def _checkpointing_keyword() -> str:
    """transformers 5.23 renamed TrainingArguments(gradient_checkpointing=) to activation_checkpointing=."""
    from transformers import TrainingArguments

    fields = TrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"


def _train(args: TrainArgs, backend: str, precision_why: str = "as asked", allreduce_why: str = "as asked") -> dict:
    import torch
    import torch.distributed as dist
    from transformers import Trainer, TrainingArguments
    from transformers.trainer_utils import get_last_checkpoint


    rank, world = dist.get_rank(), dist.get_world_size()
    out = Path(args.output_dir)
    cache_dir = Path(args.cache_dir).expanduser()

    def prepare():
        out.mkdir(parents=True, exist_ok=True)
        if args.model in PRESETS:
            local_kit(cache_dir)
        if args.sync_to and args.resume:  # a restarted job: the newest complete checkpoint back from S3

            restore_latest(args.sync_to, out)

    _node_local_first(prepare)
    ds = ds_config(args) if args.engine == "deepspeed" else None
    if ds and rank == 0:  # a record of what ran; the ranks get the dict itself, no file to share
        (out / "ds_config.json").write_text(json.dumps(ds, indent=2))

    on_cpu = backend == "gloo"
    # DeepSpeed's bf16 keeps its own fp32 masters; DDP gets them from with_master_weights instead of autocast
    masters = args.master_weights and args.precision == "bf16" and args.engine == "ddp"
    ckpt_keyword = _checkpointing_keyword()
    targs = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.grad_accum, max_steps=args.max_steps, learning_rate=args.lr,
        warmup_steps=args.warmup_steps, lr_scheduler_type="constant_with_warmup", weight_decay=0.0,
        logging_steps=1, save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500,
        bf16=args.precision == "bf16" and not masters, use_cpu=on_cpu, ddp_backend=backend, deepspeed=ds,
        **{ckpt_keyword: args.grad_ckpt}, seed=args.seed, report_to="none", disable_tqdm=True,
        dataloader_drop_last=True, optim=args.optimizer, torch_compile=args.compile, save_only_model=False,
        save_total_limit=args.save_total_limit,
        max_grad_norm=0.0 if masters else MAX_GRAD_NORM,  # the master-weights optimizer clips in its own pass
        ddp_bucket_cap_mb=args.ddp_bucket_mb, ddp_find_unused_parameters=False,  # a Llama uses every weight
        # transformers 5.23 hands this to accelerate's PartialState only when it starts the group itself (GPU
        # paths, not use_cpu), and accelerate skips that when a group exists, as it does here (init_distributed):
        # the same value in seconds keeps the record (training_args.bin) and any such path in agreement
        ddp_timeout=math.ceil(dist_timeout(args).total_seconds()),
    )
    model, tok = load_model_and_tokenizer(args, cache_dir)
    text = load_text(args.dataset, cache_dir)
    with targs.main_process_first(desc="tokenize"):
        data = tokenize_dataset(text, tok, seq_len=args.seq_len, packing=args.packing, min_chars=args.min_chars)

    state: dict = {"steps": []}

    class CountingTrainer(Trainer):
        """Counts useful (non-pad) tokens exactly where the model sees them."""

        def compute_loss(self, model, inputs, *a, **kw):
            state["tokens"] = state.get("tokens", 0) + int(inputs["attention_mask"].sum())
            return super().compute_loss(model, inputs, *a, **kw)

        if masters:
            def _get_grad_norm(self, model, grad_norm=None):
                """transformers >= 5.x measures the norm again (a pass over every gradient, multiplied by 1.0)
                when its own clipping is off; the master-weights optimizer measures it in its pass."""
                return grad_norm

        def training_step(self, model, inputs, *a, **kw):
            if args.allreduce == "shm" and "allreduce_hooked" not in state:  # DDP exists from the first step on
                state["allreduce_hooked"] = register_shm_allreduce(
                    model, average=state.get("average_in_allreduce", True))
                if not state["allreduce_hooked"]:
                    raise RuntimeError(f"--allreduce shm: the model the Trainer trains is not DDP ({type(model)})")
            return super().training_step(model, inputs, *a, **kw)

    callbacks = [make_callback(state, NumericsGuard(args.max_grad_jump))]
    if args.sync_to:

        callbacks.append(sync_callback(args.sync_to, args.save_total_limit))
    optimizer = None
    if masters:

        cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(targs, model)
        # --compile and the fused AdamW: one compiled pass per tensor clips, casts, steps and rounds; the
        # all-reduce then only sums, and dividing by N rides along in that pass
        fused_step = args.compile and args.optimizer == "adamw_torch_fused"
        divisor = world if fused_step and args.allreduce == "shm" else 1
        optimizer = (with_master_weights(cls, compiled_step=fused_step, max_grad_norm=MAX_GRAD_NORM,
                                         grad_divisor=divisor), kwargs)
        state["average_in_allreduce"] = divisor == 1
    trainer = CountingTrainer(model=model, args=targs, train_dataset=data, processing_class=tok,
                              callbacks=callbacks, optimizer_cls_and_kwargs=optimizer)
    resume_from = get_last_checkpoint(str(out)) if args.resume and out.is_dir() else None
    if rank == 0:
        print(f"workshop.train: world_size={world} backend={backend} engine={args.engine} zero={args.zero_stage} "
              f"precision={args.precision} ({precision_why}) "
              f"weights={weights_kind(args)} "
              f"dist_timeout={(pg_timeout() or dist_timeout(args)).total_seconds() / 60:g}min "
              + (f"allreduce={args.allreduce} ({allreduce_why}) " if args.engine == "ddp" else "")
              + f"threads/rank={torch.get_num_threads()} samples={len(data)} "
              f"cpu_capability={torch.backends.cpu.get_cpu_capability()}"
              + (f" resuming from {resume_from}" if resume_from else ""), flush=True)
    if args.engine == "deepspeed" and args.zero_stage == 3:
        show_zero_memory_stages()
    _fault_injection()
    trainer.train(resume_from_checkpoint=resume_from)
    final = save_final_model(trainer, out) if args.save_model else None
    if final and args.sync_to and rank == 0:

        upload_dir(final, args.sync_to)

    partition = zero3_partition(model, world)
    peaks = _gather(round(peak_rss_gb(), 3))
    result = summarize(state["steps"], world_size=world, backend=backend, peak_rss_gb_per_rank=peaks,
                       partition=partition, resumed_from=resume_from, global_step=trainer.state.global_step,
                       final_model=str(final) if final else None,
                       params=sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()),
                       torch=torch.__version__, versions=versions(), precision_why=precision_why,
                       args=asdict(args))
    if rank == 0:
        (out / "metrics.json").write_text(json.dumps(result, indent=2))
        print(f"workshop.train: done, {len(state['steps'])} steps, loss {result['first_loss']} -> "
              f"{result['final_loss']}, median {result['tokens_per_s_median']} tokens/s, metrics in {out / 'metrics.json'}",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return result


ZERO_STAGE_MESSAGES = (
    "Stage 3 initialize beginning", "DeepSpeedZeRoOffload initialize", "Before creating fp16 partitions",
    "After creating fp16 partitions", "Before creating fp32 partitions", "After creating fp32 partitions",
    "Before initializing optimizer states", "After initializing optimizer states", "After initializing ZeRO optimizer",
)


def show_zero_memory_stages() -> None:
    """Print DeepSpeed's ZeRO-3 memory stages ("MA ... GB / CPU Virtual Memory: used = ...").

    Older DeepSpeed printed them at start-up (the original workshop's log shows them); 0.19 calls the same function
    with force=False. We force just those start-up stages on, not the per-step ones.
    """
    from deepspeed.runtime import utils
    from deepspeed.runtime.zero import parameter_offload, stage3

    original = utils.see_memory_usage

    def see_memory_usage(message, force=False):
        return original(message, force=force or str(message).startswith(ZERO_STAGE_MESSAGES))

    stage3.see_memory_usage = parameter_offload.see_memory_usage = see_memory_usage


def zero3_partition(model, world: int, max_params: int = 1000) -> dict | None:
    """What each rank really holds under ZeRO-3: per parameter, its full numel and every rank's local numel.

    DeepSpeed pads each parameter so it splits evenly: a rank holds ceil(numel / N) elements of it.
    """
    params = [(n, p) for n, p in model.named_parameters() if hasattr(p, "ds_tensor")]
    if not params:
        return None
    local = [int(p.ds_tensor.numel()) for _, p in params]
    per_rank = _gather(local)
    rows = [{"name": n, "numel": int(p.ds_numel), "local_numel": [r[i] for r in per_rank]}
            for i, (n, p) in enumerate(params)][:max_params]
    return {"world_size": world, "total_numel": sum(int(p.ds_numel) for _, p in params),
            "local_numel_per_rank": [sum(r) for r in per_rank], "params": rows}


def _fault_injection() -> None:
    """WORKSHOP_KILL_AT / _RAISE_AT / _HANG_AT="RANK:STEP": that rank SIGKILLs itself, raises, or goes silent after
    STEP steps (the fault tests use them: a killed rank, a rank whose exception must be shown, a hang)."""
    for var, action in (("WORKSHOP_KILL_AT", "kill"), ("WORKSHOP_RAISE_AT", "raise"), ("WORKSHOP_HANG_AT", "hang")):
        if os.environ.get(var):
            _fault_at(*os.environ[var].split(":"), action)


def _fault_at(rank_s: str, step_s: str, action: str) -> None:
    if int(os.environ["RANK"]) != int(rank_s):
        return
    from transformers import trainer as hf_trainer

    original = hf_trainer.Trainer._maybe_log_save_evaluate

    def wrapped(self, *a, **kw):
        result = original(self, *a, **kw)
        if self.state.global_step >= int(step_s):
            if action == "kill":
                import signal

                print(f"workshop.train: fault injection, rank {rank_s} kills itself at step {self.state.global_step}",
                      flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if action == "hang":  # silent, like a rank stuck in a collective: only a watchdog can stop it
                print(f"workshop.train: fault injection, rank {rank_s} hangs at step {self.state.global_step}",
                      flush=True)
                time.sleep(10**6)
            raise RuntimeError(f"fault injection: rank {rank_s} raised at step {self.state.global_step}")
        return result

    hf_trainer.Trainer._maybe_log_save_evaluate = wrapped


def _record(fn):
    """torch.elastic's @record: an uncaught exception in a rank is written to torchrun's error file, so its
    summary (and workshop.launch.torchrun, which reads it) shows the rank's own traceback, not only an exit code."""
    try:
        from torch.distributed.elastic.multiprocessing.errors import record
    except ImportError:  # torch without the elastic package: the plain traceback still reaches the log
        return fn
    return record(fn)


@_record
def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        train(args)
    except WorkshopError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
