"""DDP's gradient all-reduce through DeepSpeed's shared-memory kernel (workshop.train.shm): where it is
chosen, why not elsewhere, and that it changes the transport only: a 2-rank run computes the same numbers
either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from workshop.errors import WorkshopError
from workshop.launch.torchrun import ops_to_build, run_torchrun
from workshop.train import TrainArgs, parse_args
from workshop.train.shm import release_orphaned_buffers, resolve_allreduce

ONE_HOST = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}


@pytest.mark.parametrize(
    "engine, backend, env, expect",
    [
        ("ddp", "gloo", ONE_HOST, ("shm", "all 4 ranks on this host")),
        ("ddp", "gloo", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, ("backend", "4 ranks on 2 hosts")),
        ("ddp", "gloo", {"WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}, ("backend", "one rank")),
        ("ddp", "nccl", ONE_HOST, ("backend", "backend nccl")),
        ("deepspeed", "gloo", ONE_HOST, ("backend", "DeepSpeed's engine runs its own collectives")),
    ],
)
def test_auto_takes_shared_memory_only_where_it_reaches_every_rank(engine, backend, env, expect):
    chosen, why = resolve_allreduce("auto", engine=engine, backend=backend, env=env)
    assert chosen == expect[0] and expect[1] in why


def test_asking_for_shm_where_it_cannot_reach_is_refused_with_the_reason_and_the_choices():
    with pytest.raises(
        WorkshopError,
        match=r"--allreduce shm is not possible here \(4 ranks on 2 hosts.*"
        r"allowed: auto or backend",
    ):
        resolve_allreduce(
            "shm", engine="ddp", backend="gloo", env={"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
        )
    assert resolve_allreduce("backend", engine="ddp", backend="gloo", env=ONE_HOST) == ("backend", "as asked")
    with pytest.raises(WorkshopError, match="unknown allreduce 'mpi'; allowed: auto, shm, backend"):
        parse_args(["--allreduce", "mpi"])
    with pytest.raises(WorkshopError, match="ddp-bucket-mb"):
        parse_args(["--ddp-bucket-mb", "0"])


def test_a_ddp_run_announces_the_kernel_build_unless_it_uses_the_backend(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # nothing built yet
    assert ops_to_build(TrainArgs(engine="ddp")) == ["deepspeed_shm_comm"]
    assert ops_to_build(TrainArgs(engine="ddp", allreduce="backend")) == []


@pytest.mark.slow
def test_two_ranks_compute_the_same_numbers_through_shared_memory_as_through_gloo(tmp_path, kit_cache):
    """fp32 (exact on any CPU): the same seed and data through either transport give the same loss and grad
    norm at every step, value for value; the log says which transport ran and why."""
    runs = {}
    for allreduce in ("shm", "backend"):
        argv = [
            "--model",
            "tiny",
            "--engine",
            "ddp",
            "--precision",
            "fp32",
            "--allreduce",
            allreduce,
            "--max-steps",
            "6",
            "--seq-len",
            "64",
            "--micro-batch",
            "4",
            "--seed",
            "3",
            "--warmup-steps",
            "0",
            "--output-dir",
            str(tmp_path / allreduce),
            "--cache-dir",
            str(kit_cache),
        ]
        runs[allreduce] = run_torchrun(argv, nproc_per_node=2, threads_per_rank=1, progress=False).check()
    assert "allreduce=shm (all 2 ranks on this host" in runs["shm"].log
    assert "allreduce=backend (as asked)" in runs["backend"].log
    trace = {k: [(s["loss"], s["grad_norm"]) for s in r.metrics["steps"]] for k, r in runs.items()}
    assert trace["shm"] == trace["backend"] and len(trace["shm"]) == 6
    losses = [loss for loss, _ in trace["shm"]]
    assert losses[-1] < losses[0]


def test_a_sweep_removes_only_this_users_buffers_that_no_process_holds(tmp_path, monkeypatch):
    """A run killed with its launcher leaves ~66 MB of RAM per rank in /dev/shm; the next launch sweeps them.
    A buffer some process still has open (from shm_open) or only mapped belongs to a live run and stays."""
    import os
    import subprocess
    import sys

    from workshop.train import shm

    monkeypatch.setattr(shm, "SHM_DIR", tmp_path)
    mine = f"deepspeed_allreduce_buffer_{os.getuid()}_localhost_"
    names = {
        "open": mine + "1_0",
        "mapped": mine + "1_1",
        "orphan": mine + "2_0",
        "other user": f"deepspeed_allreduce_buffer_{os.getuid() + 1}_localhost_3_0",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"\0" * 4096)
    # a process that maps the buffer and closes its descriptor (Python's mmap would keep a dup of it open)
    map_only = (
        "import ctypes, os, sys, time\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.mmap.restype = ctypes.c_void_p\n"
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,"
        " ctypes.c_long]\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "assert libc.mmap(None, 4096, 3, 1, fd, 0) not in (None, ctypes.c_void_p(-1).value)\n"
        "os.close(fd)\n"
        "print('mapped', flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", map_only, str(tmp_path / names["mapped"])], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "mapped"
        assert not any(
            os.readlink(fd).startswith(str(tmp_path)) for fd in Path(f"/proc/{child.pid}/fd").iterdir()
        )
        with open(tmp_path / names["open"], "rb"):
            assert release_orphaned_buffers() == [names["orphan"]]
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
                n for k, n in names.items() if k != "orphan"
            )
    finally:
        child.kill()
        child.wait()
    assert release_orphaned_buffers() == sorted([names["open"], names["mapped"]])
    assert [p.name for p in tmp_path.iterdir()] == [names["other user"]]
