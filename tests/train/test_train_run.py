"""Real training runs of the entry point: torchrun with 2 ranks, a plain process, a killed rank and a
resume."""

import json
import math
import subprocess
import sys

import pytest

from workshop.launch import ledger
from workshop.launch.torchrun import run_torchrun
from workshop.train.logs import parse_zero_stages

pytestmark = pytest.mark.slow


def common(tmp_path, kit_cache, steps=20, **extra):
    argv = [
        "--model",
        "tiny",
        "--max-steps",
        str(steps),
        "--output-dir",
        str(tmp_path / "run"),
        "--cache-dir",
        str(kit_cache),
        "--seq-len",
        "64",
        "--micro-batch",
        "4",
    ]
    for k, v in extra.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return argv


def test_two_rank_zero3_trains_and_partitions(tmp_path, kit_cache, monkeypatch):
    """torchrun, 2 ranks, DeepSpeed ZeRO-3: the loss falls, every parameter is split in two, and the start
    line shows the group's timeout as read back from the group, which the checkpoint's TrainingArguments
    carry too (in seconds). The launch ledger has the run as one line: 2 ranks, 20 steps, its start-up."""
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "launches.jsonl"))
    argv = common(tmp_path, kit_cache, dist_timeout_min=45, save_steps=20)
    r = run_torchrun(argv, nproc_per_node=2, threads_per_rank=1, progress=False).check()
    (launch,) = ledger.read(tmp_path / "launches.jsonl")
    assert launch["module"] == "workshop.train" and launch["ranks"] == 2 and launch["steps"] == 20
    assert 0 < launch["start_s"] < launch["seconds"] and launch["cpu_s"] > 0 and launch["exit"] == 0
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    # precision "auto" (the default) resolved for THIS machine, and the run says why
    from workshop.plan.hardware import resolve_precision

    chosen, why = resolve_precision("auto")
    assert m["args"]["precision"] == chosen and m["precision_why"] == why
    assert f"precision={chosen} ({why})" in r.log
    assert m == r.metrics and m["world_size"] == 2 and len(m["steps"]) == 20
    losses = [s["loss"] for s in m["steps"]]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses  # falling, by a clear margin
    assert all(len(s["rss_gb"]) == 2 and all(0.1 < x < 8 for x in s["rss_gb"]) for s in m["steps"])
    assert m["tokens_per_s_median"] > 0
    # every parameter is split: each rank holds ceil(numel / 2) elements of it, no rank holds a whole one
    part = m["partition"]
    assert part["world_size"] == 2 and len(part["params"]) == 39
    for p in part["params"]:
        assert p["local_numel"] == [math.ceil(p["numel"] / 2)] * 2, p
    assert sum(part["local_numel_per_rank"]) - part["total_numel"] <= len(part["params"])
    cfg = json.loads((tmp_path / "run" / "ds_config.json").read_text())
    assert cfg["zero_optimization"]["stage"] == 3 and cfg["bf16"]["enabled"] == "auto"
    stages = [s["stage"] for s in parse_zero_stages(r.log)]
    assert "After initializing ZeRO optimizer" in stages and "After creating fp32 partitions" in stages
    import torch

    assert "engine=deepspeed" in r.log and " dist_timeout=45min " in r.log
    targs = torch.load(tmp_path / "run" / "checkpoint-20" / "training_args.bin", weights_only=False)
    assert targs.ddp_timeout == 45 * 60 and m["args"]["dist_timeout_min"] == 45


def test_plain_process_needs_no_launcher(tmp_path, kit_cache):
    """The original workshop's script crashed with KeyError: 'LOCAL_RANK' when run without torchrun; the entry
    point must not."""
    env_clean = {
        k: v
        for k, v in __import__("os").environ.items()
        if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    r = subprocess.run(
        [sys.executable, "-m", "workshop.train", *common(tmp_path, kit_cache, steps=3)],
        capture_output=True,
        text=True,
        env=env_clean,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["world_size"] == 1 and len(m["steps"]) == 3 and "KeyError" not in r.stderr


def test_killed_rank_fails_loudly_and_resume_loses_no_step(tmp_path, kit_cache):
    """A rank killed mid-run fails the run loudly; --resume continues from the last checkpoint. Neither run
    leaves DeepSpeed's ~66 MB-per-rank /dev/shm buffers behind (DeepSpeed never unlinks them: the entry point
    and the launcher must), and a launch sweeps what an earlier run killed with its launcher left."""
    from workshop.train.shm import SHM_DIR, SHM_GLOB, user_buffer_prefix

    orphan = SHM_DIR / f"{user_buffer_prefix()}localhost_1_0"
    orphan.write_bytes(b"\0" * 4096)  # no process holds it: what a run killed with its launcher leaves
    before = set(SHM_DIR.glob(SHM_GLOB))

    def new_buffers() -> set:
        return set(SHM_DIR.glob(SHM_GLOB)) - before

    argv = common(tmp_path, kit_cache, steps=12, save_steps=4)
    crashed = run_torchrun(
        argv, nproc_per_node=2, threads_per_rank=1, progress=False, env={"WORKSHOP_KILL_AT": "1:6"}
    )
    assert crashed.returncode != 0 and crashed.metrics is None
    assert "kills itself at step 6" in crashed.log
    assert max(s["step"] for s in crashed.steps) <= 6
    assert (tmp_path / "run" / "checkpoint-4").is_dir() and not (tmp_path / "run" / "checkpoint-8").exists()
    assert not orphan.exists()  # the launch swept it
    assert new_buffers() == set()  # nor the killed run's

    resumed = run_torchrun(argv + ["--resume"], nproc_per_node=2, threads_per_rank=1, progress=False).check()
    assert new_buffers() == set()  # nor a finished run's
    m = resumed.metrics
    assert m["resumed_from"].endswith("checkpoint-4") and m["global_step"] == 12
    assert [s["step"] for s in m["steps"]] == list(range(5, 13))  # steps 5..12: none lost, none repeated
    # the resumed run continues the same trajectory: its step 5 loss is close to the crashed run's step 5
    loss_5 = next(s["loss"] for s in crashed.steps if s["step"] == 5)
    assert abs(m["steps"][0]["loss"] - loss_5) < 0.05, (loss_5, m["steps"][0])


def test_two_nodes_without_a_shared_filesystem(tmp_path, kit_cache):
    """Like two TrainJob pods: separate output and cache folders; each node prepares its own copy."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def node(i):
        argv = [
            "--model",
            "tiny",
            "--max-steps",
            "4",
            "--seq-len",
            "64",
            "--output-dir",
            str(tmp_path / f"node{i}"),
            "--cache-dir",
            str(kit_cache if i == 0 else tmp_path / "cache1"),
        ]
        return run_torchrun(
            argv,
            nproc_per_node=1,
            nnodes=2,
            node_rank=i,
            rdzv_endpoint=f"127.0.0.1:{port}",
            threads_per_rank=1,
            progress=False,
            timeout=600,
        )

    with ThreadPoolExecutor(2) as pool:
        r0, r1 = pool.map(node, [0, 1])
    assert r0.returncode == 0 and r1.returncode == 0, r1.log[-2000:]
    # c10d rendezvous hands out ranks in arrival order, so global rank 0 (which writes metrics.json) may be
    # on either node: exactly one node has the file
    written = [r.metrics for r in (r0, r1) if r.metrics]
    assert len(written) == 1 and written[0]["world_size"] == 2 and len(written[0]["steps"]) == 4
    assert (tmp_path / "cache1" / "corpus.txt").exists()  # node 1 built its own kit


def test_a_rank_that_raises_shows_its_own_exception(tmp_path, kit_cache):
    run = run_torchrun(
        common(tmp_path, kit_cache, steps=6),
        nproc_per_node=2,
        threads_per_rank=1,
        progress=False,
        env={"WORKSHOP_RAISE_AT": "1:2"},
    )
    assert not run.ok
    with pytest.raises(RuntimeError) as err:
        run.check()
    text = str(err.value)
    assert text.startswith(
        "rank 1 failed (exit 1): RuntimeError: fault injection: rank 1 raised at step 2"
    ), text
    assert "workshop/train/faults.py" in text and "whole log:" in text  # the rank's own frames


def test_a_silent_hang_is_stopped_and_names_each_ranks_last_line(tmp_path, kit_cache):
    import time

    from workshop.launch.torchrun import RunHung

    t0 = time.time()
    with pytest.raises(RunHung) as err:
        run_torchrun(
            common(tmp_path, kit_cache, steps=50),
            nproc_per_node=2,
            threads_per_rank=1,
            progress=False,
            timeout=600,
            step_timeout=8,  # a tiny step takes under a second, a few on a busy machine
            env={"WORKSHOP_HANG_AT": "1:2"},
        )
    assert time.time() - t0 < 150  # stopped by the step watchdog, not by the run ending or the total timeout
    assert "no step for 8 s after step 2" in str(err.value)
    assert "rank 1: workshop.train: fault injection, rank 1 hangs at step 2" in str(err.value)
    assert "rank 0:" in str(err.value)
    import psutil  # torchrun starts ranks in sessions of their own: stopping torchrun alone orphaned them

    left = [
        p.info
        for p in psutil.process_iter(["pid", "cmdline"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert not left, f"processes of the stopped run still alive: {left}"


def test_bf16_master_weights_track_autocast_and_checkpoint_the_masters(tmp_path, kit_cache):
    """--master-weights (bf16 model, fp32 masters in the optimizer) against the recipe's fp32 weights + bf16
    autocast, same seed and data on 2 DDP ranks: both compute in bf16, so the losses agree to bf16 precision;
    a checkpoint carries the fp32 masters, so a resume does not restart from their bf16 rounding."""
    import torch

    from workshop.train.master_weights import MASTER_KEY

    runs = {}
    for name, extra in (("autocast", {}), ("masters", {"master_weights": True, "save_steps": 8})):
        argv = common(tmp_path / name, kit_cache, steps=8, engine="ddp", precision="bf16", **extra)
        runs[name] = run_torchrun(argv, nproc_per_node=2, threads_per_rank=1, progress=False).check()
    assert (
        "weights=fp32+bf16-autocast" in runs["autocast"].log
        and "weights=bf16+fp32-master" in runs["masters"].log
    )
    la = [s["loss"] for s in runs["autocast"].metrics["steps"]]
    lm = [s["loss"] for s in runs["masters"].metrics["steps"]]
    assert lm == pytest.approx(la, rel=1e-2), (la, lm)
    assert sum(lm[-3:]) / 3 < sum(lm[:3]) / 3 - 0.3, lm
    state = torch.load(tmp_path / "masters" / "run" / "checkpoint-8" / "optimizer.pt", weights_only=False)
    masters = state[MASTER_KEY]
    assert masters and all(m.dtype == torch.float32 for m in masters)
    assert sum(m.numel() for m in masters) == runs["masters"].metrics["params"]
