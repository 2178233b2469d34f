"""DeepSpeed's shared-memory collective buffers: one ~66 MB file per rank in /dev/shm (RAM), never unlinked by
DeepSpeed 0.19. Every process that starts DeepSpeed's process group releases its run's buffers when it ends,
however it ends; the launcher sweeps up after ranks that were killed, and, before it starts, after runs that
were killed with their launcher."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from workshop.errors import WorkshopError, check_choice
from workshop.train.dsprobe import probe_deepspeed_ops, use_versioned_extensions_dir

SHM_DIR = Path("/dev/shm")
SHM_GLOB = "deepspeed_allreduce_buffer_*"


def user_buffer_prefix() -> str:
    """Name prefix of every shared-memory file DeepSpeed's CPU collective creates for this user (shm.cpp)."""
    return f"deepspeed_allreduce_buffer_{os.getuid()}_"


def shm_buffer_prefix() -> str:
    """Name prefix of the shared-memory files DeepSpeed's CPU collective creates for this run."""
    return f"{user_buffer_prefix()}{os.environ.get('MASTER_ADDR')}_{os.environ.get('MASTER_PORT')}_"


def release_shm_buffers() -> int:
    """Unlink this run's DeepSpeed shared-memory buffers (one ~66 MB file per rank in /dev/shm).

    DeepSpeed 0.19 creates them when all ranks are on one host and never removes them: /dev/shm is RAM,
    so a day of runs fills the machine's memory. Unlinking removes only the name: a rank that still has a
    buffer mapped keeps it until it exits, so every rank may call this at its end, in any order.
    """
    removed = 0
    for path in SHM_DIR.glob(shm_buffer_prefix() + "*"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def held_shm_paths() -> set[str]:
    """Paths under SHM_DIR that a live process holds open or mapped, read from /proc (a process this user may
    not read is skipped: the buffers are mode 0600, so only this user's processes can hold them)."""
    prefix, held = f"{SHM_DIR}/", set[str]()

    def read(path: Path, how):
        try:
            return how(path)
        except OSError:  # the process (or descriptor) ended while we read it, or is not ours
            return None

    for proc in Path("/proc").glob("[0-9]*"):
        targets = (read(fd, os.readlink) for fd in read(proc / "fd", lambda p: list(p.iterdir())) or ())
        held.update(t for t in targets if t and t.startswith(prefix))
        maps = read(proc / "maps", Path.read_text) or ""
        held.update(line[line.index(prefix) :] for line in maps.splitlines() if prefix in line)
    return held


def release_orphaned_buffers(paths=None) -> list[str]:
    """Unlink this user's DeepSpeed buffers that no live process holds open or mapped; their names.

    A run killed outright (SIGKILL, a restarted Jupyter kernel, the OOM killer) releases nothing, and its
    launcher may have died with it, so the next launch sweeps: a buffer is open from shm_open until its rank
    exits, so one nobody holds belongs to no run. `paths` narrows the sweep (default: every buffer of this
    user).
    """
    if paths is None:
        paths = SHM_DIR.glob(user_buffer_prefix() + "*")
    paths = sorted(paths)
    if not paths:
        return []
    held = held_shm_paths()
    gone = [p for p in paths if str(p) not in held]
    for path in gone:
        path.unlink(missing_ok=True)
    return [p.name for p in gone]


# ---------------------------------------------------------------- DDP's gradient all-reduce through the same
# kernel

ALLREDUCES = ("auto", "shm", "backend")


def resolve_allreduce(
    choice: str, *, engine: str, backend: str, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """How DDP's gradient all-reduce travels: 'shm' or 'backend' (the process group's), and why.

    gloo moves a CPU all-reduce through loopback TCP, copying every byte through the kernel's socket buffers
    on the same cores that train; DeepSpeed's shared-memory kernel (the one its CPU collectives use) reduces
    in a buffer every rank maps. It reaches only ranks on one host, and only CPU tensors.
    """

    check_choice("allreduce", choice, ALLREDUCES)
    if choice == "backend":
        return "backend", "as asked"
    ranks: Mapping[str, str] = os.environ if env is None else env
    world = int(ranks.get("WORLD_SIZE", "1"))
    local = int(ranks.get("LOCAL_WORLD_SIZE", ranks.get("WORLD_SIZE", "1")))
    why_not = (
        "DeepSpeed's engine runs its own collectives"
        if engine != "ddp"
        else f"backend {backend}: the shared-memory kernel reduces CPU tensors (gloo's)"
        if backend != "gloo"
        else "one rank: nothing to reduce"
        if world == 1
        else f"{world} ranks on {world // max(local, 1)} hosts: shared memory reaches only one host's"
        if local != world
        else None
    )
    if why_not is None:
        return (
            "shm",
            f"all {world} ranks on this host: DeepSpeed's shared-memory kernel instead of gloo's TCP",
        )
    if choice == "shm":
        raise WorkshopError(f"--allreduce shm is not possible here ({why_not}); allowed: auto or backend")
    return "backend", why_not


def start_shm_kernel() -> str | None:
    """Load DeepSpeed's shared-memory collective into this process (after the process group exists).

    Returns None when the kernel is ready for bf16 and fp32 tensors, else the reason it cannot be used (no C++
    compiler to build it, or a CPU without the AVX-512 its bf16 kernel needs).
    """
    import torch

    use_versioned_extensions_dir()
    if not probe_deepspeed_ops().get("deepspeed_shm_comm"):
        return "DeepSpeed's shm op cannot be built here (a C++ compiler is needed)"
    import deepspeed.comm as ds_comm

    ds_comm.init_distributed(dist_backend="gloo", verbose=False)
    if not hasattr(torch.ops.deepspeed, "inference_all_reduce_"):
        return "DeepSpeed's shm op did not load"
    return None


def shm_kernel_handles(dtype) -> bool:
    """The kernel's bf16 reduce needs AVX-512BW and its fp32 reduce AVX2 (DeepSpeed's own rule)."""
    import deepspeed.comm as ds_comm
    import torch

    level = getattr(ds_comm.comm.cdb, "shm_vector_kernel_level", 0)
    return level >= (1 if dtype == torch.float32 else 2)


def shm_allreduce_hook(state, bucket):
    """A DDP communication hook: all-reduce the bucket in place through shared memory. DDP's own hook divides
    by the world size first, a pass over every gradient; with `state["average"]` False the sum is left for an
    optimizer that scales every gradient anyway (workshop.train.master_weights' grad_divisor)."""
    import torch
    import torch.distributed as dist

    buf = bucket.buffer()
    if state is None or state.get("average", True):
        buf.div_(dist.get_world_size())
    torch.ops.deepspeed.inference_all_reduce_(buf)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def register_shm_allreduce(model, *, average: bool = True) -> bool:
    """Route a DDP model's gradient all-reduce through the shared-memory kernel (summing only, with average
    False); False when `model` holds no DDP (one rank) or a dtype the kernel cannot reduce on this CPU."""
    from torch.nn.parallel import DistributedDataParallel

    ddp = getattr(model, "_orig_mod", model)  # torch.compile wraps the DDP module
    if not isinstance(ddp, DistributedDataParallel):
        return False
    dtypes = {p.dtype for p in ddp.parameters() if p.requires_grad}
    if not all(shm_kernel_handles(dt) for dt in dtypes):
        return False
    ddp.register_comm_hook({"average": average}, shm_allreduce_hook)
    return True
