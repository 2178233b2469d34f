"""DDP's gradient all-reduce through DeepSpeed's shared-memory kernel (workshop.shm): where it is chosen, why
not elsewhere, and that it changes the transport only: a 2-rank run computes the same numbers either way."""

from __future__ import annotations

import pytest

from workshop.errors import WorkshopError
from workshop.launch import ops_to_build, run_torchrun
from workshop.shm import resolve_allreduce
from workshop.train import TrainArgs, parse_args

ONE_HOST = {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}


@pytest.mark.parametrize("engine, backend, env, expect", [
    ("ddp", "gloo", ONE_HOST, ("shm", "all 4 ranks on this host")),
    ("ddp", "gloo", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, ("backend", "4 ranks on 2 hosts")),
    ("ddp", "gloo", {"WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}, ("backend", "one rank")),
    ("ddp", "nccl", ONE_HOST, ("backend", "backend nccl")),
    ("deepspeed", "gloo", ONE_HOST, ("backend", "DeepSpeed's engine runs its own collectives")),
])
def test_auto_takes_shared_memory_only_where_it_reaches_every_rank(engine, backend, env, expect):
    chosen, why = resolve_allreduce("auto", engine=engine, backend=backend, env=env)
    assert chosen == expect[0] and expect[1] in why


def test_asking_for_shm_where_it_cannot_reach_is_refused_with_the_reason_and_the_choices():
    with pytest.raises(WorkshopError, match=r"--allreduce shm is not possible here \(4 ranks on 2 hosts.*"
                                            r"allowed: auto or backend"):
        resolve_allreduce("shm", engine="ddp", backend="gloo", env={"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"})
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
    """fp32 (exact on any CPU): the same seed and data through either transport give the same loss and grad norm
    at every step, value for value; the log says which transport ran and why."""
    runs = {}
    for allreduce in ("shm", "backend"):
        argv = ["--model", "tiny", "--engine", "ddp", "--precision", "fp32", "--allreduce", allreduce,
                "--max-steps", "6", "--seq-len", "64", "--micro-batch", "4", "--seed", "3", "--warmup-steps", "0",
                "--output-dir", str(tmp_path / allreduce), "--cache-dir", str(kit_cache)]
        runs[allreduce] = run_torchrun(argv, nproc_per_node=2, threads_per_rank=1, progress=False).check()
    assert "allreduce=shm (all 2 ranks on this host" in runs["shm"].log
    assert "allreduce=backend (as asked)" in runs["backend"].log
    trace = {k: [(s["loss"], s["grad_norm"]) for s in r.metrics["steps"]] for k, r in runs.items()}
    assert trace["shm"] == trace["backend"] and len(trace["shm"]) == 6
    losses = [loss for loss, _ in trace["shm"]]
    assert losses[-1] < losses[0]
