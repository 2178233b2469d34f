"""The process and its process group: what a rank sets up before torch starts, the group itself (started
before TrainingArguments, with one timeout for every engine and backend), and the collectives the loop runs
around it.

A plain `python -m workshop.train` is made to look like a one-rank torchrun here, so DeepSpeed never hits
`KeyError: 'LOCAL_RANK'`.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from workshop.errors import WorkshopError
from workshop.train import dsprobe
from workshop.train.affinity import pin_rank
from workshop.train.args import TrainArgs
from workshop.train.shm import shm_kernel_handles, start_shm_kernel


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
        os.environ.update(
            RANK="0",
            WORLD_SIZE="1",
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
        )
    os.environ.setdefault("LOCAL_SIZE", os.environ.get("LOCAL_WORLD_SIZE", "1"))


def stop_on_sigterm() -> None:
    """torchrun SIGTERMs the surviving ranks when one fails; turn that into SystemExit so `finally` runs."""
    import signal

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def set_up_process(args: TrainArgs) -> None:
    """The rank's environment, its SIGTERM handling, threads and cores: what torch and OpenMP read at
    start."""
    ensure_process_env()
    stop_on_sigterm()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.pin_cores:  # before torch starts: OpenMP binds its threads to the affinity it finds at start-up
        pin_rank(args.threads)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)


def resolve_backend(backend: str) -> str:
    import torch

    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl" and not torch.cuda.is_available():
        raise WorkshopError(
            "backend 'nccl' needs CUDA GPUs and none is visible; use --backend gloo (or auto)"
        )
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

        dsprobe.use_versioned_extensions_dir()
        dsprobe.probe_deepspeed_ops()  # before DeepSpeed's own probe, which prints linker errors in notebooks
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


def grad_dtype(args: TrainArgs):
    """The dtype DDP all-reduces: bf16 when the model itself is bf16 (master weights), else fp32 (autocast
    keeps fp32 weights, so their gradients are fp32 too)."""
    import torch

    return torch.bfloat16 if args.precision == "bf16" and args.master_weights else torch.float32


def start_shm_allreduce(args: TrainArgs, why: str) -> tuple[str, str]:
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


# ---------------------------------------------------------------- rank helpers


def rank() -> int:
    import torch.distributed as dist

    return dist.get_rank()


def gather(value) -> list:
    """`value` from every rank, in rank order (just [value] without a group or with one rank)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [value]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def node_local_first(fn) -> None:
    """Run fn on each node's local rank 0 first, then on nobody else until it is done.

    Nodes of a TrainJob do not share a filesystem, so "global rank 0 writes, everyone reads" breaks on the
    second node: every node prepares its own copy (writes are atomic, so a shared volume is safe too).
    """
    import torch.distributed as dist

    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        fn()
    dist.barrier()


def leave_group() -> None:
    """Every rank reaches the end, then the group is taken down."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
