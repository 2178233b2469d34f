"""netsim: rate parsing, the per-node torchrun command, the loopback fallback, and real namespace runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from workshop.errors import WorkshopError
from workshop.launch import netns, netsim

HAS_NETNS = os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("tc") is not None
needs_root = pytest.mark.skipif(not HAS_NETNS, reason="needs root and iproute2 for network namespaces")

# A stand-in for the training entry point: a real gloo process group over the (simulated) network,
# 4 all-reduces of 4 MB per "step", METRIC lines with a falling loss. Seconds instead of minutes.
FAKE_TRAIN = textwrap.dedent("""
    import argparse, json, os, time
    import torch, torch.distributed as dist
    p = argparse.ArgumentParser(); p.add_argument("--threads"); p.add_argument("--output-dir")
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    dist.init_process_group("gloo")
    x = torch.ones(1_000_000)
    for step in range(1, a.steps + 1):
        t = time.perf_counter()
        for _ in range(4):
            dist.all_reduce(x)
        if dist.get_rank() == 0:
            rec = {"step": step, "loss": 10.0 / step, "step_time_s": time.perf_counter() - t}
            print("METRIC " + json.dumps(rec), flush=True)
    if dist.get_rank() == 0:
        os.makedirs(a.output_dir, exist_ok=True)
        with open(os.path.join(a.output_dir, "metrics.json"), "w") as f:
            json.dump({"world_size": dist.get_world_size()}, f)
    dist.destroy_process_group()
""")


def _netns_list() -> str:
    return subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True).stdout


@pytest.fixture()
def fake_module(tmp_path, monkeypatch):
    (tmp_path / "fake_train.py").write_text(FAKE_TRAIN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return "fake_train"


def test_parse_rate():
    assert netsim.parse_rate("10gbit") == 10_000_000_000
    assert netsim.parse_rate("1Gbit") == 1_000_000_000
    assert netsim.parse_rate("500mbit") == 500_000_000
    assert netsim.parse_rate("none") is None
    for bad in ("10", "fast", "10gbps", "0mbit", "-1gbit"):
        with pytest.raises(WorkshopError, match="bad rate"):
            netsim.parse_rate(bad)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"nodes": 0}, "nodes must be"),
        ({"rates": []}, "at least one rate"),
        ({"rates": ["10gbps"]}, "bad rate"),
        ({"subnet": "8.8.8.0/24"}, "not private"),
        ({"subnet": "10.77.0.0/31", "nodes": 2}, "no room"),
        ({"mode": "docker"}, "unknown netsim mode"),
        ({"prefix": "Bad-Prefix"}, "bad prefix"),
    ],
)
def test_bad_config(kw, match):
    with pytest.raises(WorkshopError, match=match):
        netsim.NetSimConfig(**kw)


def test_node_command_is_the_multi_node_launch(tmp_path):
    cfg = netsim.NetSimConfig(nodes=2, procs_per_node=1, threads_per_rank=1)
    cmd = netsim.node_command(cfg, 1, "10.77.0.2", "10.77.0.1", tmp_path, "rid")
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert {
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.77.0.1:29500",
        "--local-addr=10.77.0.2",
        "--rdzv-conf=is_host=0",
    } <= set(cmd)
    i = cmd.index("-m", 3)
    assert cmd[i + 1] == "workshop.train" and "--model" in cmd and cmd[-2:] == ["--output-dir", str(tmp_path)]
    host = netsim.node_command(cfg, 0, "10.77.0.1", "10.77.0.1", tmp_path, "rid")
    assert "--rdzv-conf=is_host=1" in host


def test_without_root_falls_back_to_loopback_and_says_so(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    mode, reason = netsim.choose_mode("auto", 2)
    assert mode == "loopback" and "need root" in reason and "loopback" in reason
    with pytest.raises(WorkshopError, match="not available"):
        netsim.choose_mode("netns")


def test_loopback_two_node_groups(tmp_path, fake_module):
    cfg = netsim.NetSimConfig(
        mode="loopback",
        rates=["none"],
        out_dir=tmp_path,
        module=fake_module,
        train_args=["--steps", "3"],
        port=29611,
        timeout_s=120,
    )
    report = netsim.run(cfg, progress=lambda s: None)
    (res,) = report.results
    assert report.mode == "loopback" and res.ok, res.note
    assert [s["step"] for s in res.steps] == [1, 2, 3] and res.world_size == 2
    assert res.nodes[0].tx_bytes is None  # loopback cannot count per node, and says None rather than guess


@needs_root
@pytest.mark.root
def test_topology_is_wired_capped_and_always_torn_down():
    prefix = "wst"
    with pytest.raises(RuntimeError, match="boom"), netns.Topology(2, "10.77.9.0/24", prefix) as topo:
        names = _netns_list()
        tag = f"{prefix}{os.getpid()}"
        assert topo.namespaces == [f"{tag}-n0", f"{tag}-n1"] and topo.switch == f"{tag}-sw"
        assert all(n in names for n in [*topo.namespaces, topo.switch])
        assert topo.addresses == ["10.77.9.1", "10.77.9.2"]
        assert topo.reachable()
        topo.set_rate("1gbit")
        qd = subprocess.run(
            ["ip", "netns", "exec", topo.namespaces[0], "tc", "qdisc", "show", "dev", "eth0"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert "tbf" in qd and "1Gbit" in qd
        assert all(c["tx_bytes"] >= 0 for c in topo.counters())
        raise RuntimeError("boom")
    names = _netns_list()
    assert f"{prefix}{os.getpid()}-" not in names


@needs_root
@pytest.mark.root
def test_stale_namespaces_are_cleaned():
    dead = _dead_pid()
    made = [f"wsq{dead}-n3", f"wsq{os.getppid()}-n0", "wsqother"]  # dead owner, live owner, not ours
    for name in made:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert netns.cleanup_stale("wsq") == [f"wsq{dead}-n3"]
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], check=False)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # exited and reaped: no such process now


@needs_root
@pytest.mark.root
@pytest.mark.slow  # two 2-process gloo runs, one capped at 50 Mbit/s: ~50 MB per node at that rate
def test_namespace_run_counts_bytes_and_slows_down_under_a_tight_cap(tmp_path, fake_module):
    cfg = netsim.NetSimConfig(
        rates=["10gbit", "100mbit"],
        out_dir=tmp_path,
        module=fake_module,
        mode="netns",
        train_args=["--steps", "3"],
        subnet="10.77.8.0/24",
        prefix="wsf",
        timeout_s=120,
    )
    report = netsim.run(cfg, progress=lambda s: None)
    fast, slow = report.results
    assert fast.ok and slow.ok, (fast.note, slow.note)
    # 3 steps x 4 all-reduces x 4 MB: each node must have sent well over 20 MB
    for r in (fast, slow):
        assert all(n.tx_bytes > 20e6 for n in r.nodes), [n.tx_bytes for n in r.nodes]
    assert slow.step_time_s_median > 2 * fast.step_time_s_median
    out = report.to_json(tmp_path / "netsim.json")
    assert json.loads(out.read_text())["table"][1]["rate"] == "100mbit"
    assert f"wsf{os.getpid()}-" not in _netns_list()


@needs_root
@pytest.mark.root
@pytest.mark.slow
def test_real_training_two_nodes_across_namespaces(tmp_path):
    """The workbook's entry point, ZeRO-3 over gloo, 2 nodes in 2 namespaces: completes, loss falls."""
    cfg = netsim.NetSimConfig(
        rates=["1gbit"],
        out_dir=tmp_path,
        mode="netns",
        subnet="10.77.7.0/24",
        prefix="wsr",
        timeout_s=400,
        train_args=[
            "--model",
            "tiny",
            "--dataset",
            "local",
            "--seq-len",
            "128",
            "--micro-batch",
            "4",
            "--max-steps",
            "5",
            "--engine",
            "deepspeed",
            "--zero-stage",
            "3",
            "--precision",
            "auto",
            "--backend",
            "gloo",
        ],
    )
    (res,) = netsim.run(cfg, progress=lambda s: None).results
    assert res.ok, res.note + Path(res.nodes[0].log_path).read_text()[-3000:]
    assert res.world_size == 2 and len(res.steps) == 5
    assert res.final_loss < res.first_loss
    assert all(n.tx_bytes > 1e6 for n in res.nodes)
