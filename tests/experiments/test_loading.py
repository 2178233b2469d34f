"""Sharded loading: checkpoint files, clear errors for bad input, the sampler, the planner comparison, real
runs."""

from __future__ import annotations

import json
import os

import pytest

from workshop.cli.experiments import load as load_command
from workshop.errors import WorkshopError
from workshop.experiments import loading


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return loading.write_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", "tiny", max_shard_size="5MB")


def test_checkpoint_looks_like_a_hub_checkpoint(ckpt):
    from workshop.plan.models import architecture

    names = {p.name for p in ckpt.iterdir()}
    assert {"config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"} <= names
    info = loading.verify_checkpoint(ckpt)
    assert len(info.shards) >= 3 and all(s in names for s in info.shards)
    assert info.numel == architecture("tiny").params
    assert info.bytes == 2 * info.numel and info.dtype == "bf16"
    index = json.loads((ckpt / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(info.shards)


def test_rewrite_with_same_spec_is_skipped(ckpt):
    before = {p.name: p.stat().st_mtime_ns for p in ckpt.glob("*.safetensors")}
    loading.write_checkpoint(ckpt, "tiny", max_shard_size="5MB")
    assert {p.name: p.stat().st_mtime_ns for p in ckpt.glob("*.safetensors")} == before


def _copy(ckpt, tmp_path):
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(ckpt, dst)
    return dst, loading.verify_checkpoint(dst).shards


def test_missing_shard_names_the_shard(ckpt, tmp_path):
    dst, shards = _copy(ckpt, tmp_path)
    (dst / shards[1]).unlink()
    with pytest.raises(WorkshopError, match=f"{shards[1]}.*missing"):
        loading.verify_checkpoint(dst)


def test_corrupt_and_truncated_shards_are_clear_errors(ckpt, tmp_path):
    dst, shards = _copy(ckpt, tmp_path)
    (dst / shards[0]).write_bytes(b"garbage that is not a safetensors header")
    with pytest.raises(WorkshopError, match=f"{shards[0]}.*corrupt or truncated"):
        loading.verify_checkpoint(dst)
    dst2, _ = _copy(ckpt, tmp_path / "b")
    data = (dst2 / shards[-1]).read_bytes()
    (dst2 / shards[-1]).write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkshopError, match=shards[-1]):
        loading.verify_checkpoint(dst2)


def test_missing_directory_and_config(tmp_path):
    with pytest.raises(WorkshopError, match="does not exist"):
        loading.verify_checkpoint(tmp_path / "nope")
    with pytest.raises(WorkshopError, match="config.json"):
        loading.verify_checkpoint(tmp_path)


def test_world_size_beyond_the_machine_is_refused():
    cores = os.cpu_count()
    loading.check_world_size(1)
    with pytest.raises(WorkshopError, match=f"world size {cores + 1}.*allowed: 1..{cores}"):
        loading.check_world_size(cores + 1)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(WorkshopError):
            loading.check_world_size(bad)
    with pytest.raises(WorkshopError, match="GB"):  # a model that cannot fit in RAM twice
        loading.check_world_size(1, model_bytes=10**15, method="naive")


def test_cli_bad_input_exits_2_with_one_line(ckpt, tmp_path, capsys):
    assert load_command(["run", "--checkpoint", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith("error: checkpoint directory")
    with pytest.raises(SystemExit, match="2"):  # argparse checks the lists: a usage line, then the error
        load_command(["run", "--checkpoint", str(ckpt), "--methods", "naive,bogus"])
    assert (
        "argument --methods: unknown 'bogus' in 'naive,bogus'; allowed: naive, meta, zero3, zero3-stream"
        in capsys.readouterr().err
    )
    assert load_command(["run", "--checkpoint", str(ckpt), "--ranks", "1,99"]) == 2
    assert "larger than this machine allows" in capsys.readouterr().err
    assert load_command(["checkpoint", "--model", "huge", "--out", str(tmp_path / "c")]) == 2
    assert "unknown model preset 'huge'" in capsys.readouterr().err


def test_worker_outside_torchrun_is_a_clear_error(ckpt, tmp_path, monkeypatch):
    from workshop.experiments.loading import ranks

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(WorkshopError, match="torchrun"):
        ranks.worker({"method": "naive", "checkpoint": str(ckpt), "out_dir": str(tmp_path)})


def test_sampler_catches_a_short_lived_allocation():
    import torch

    with loading.PeakRSS() as s:
        start = loading.rss_bytes()
        t = torch.ones(300 * 2**20 // 4)  # 300 MiB, touched
        del t
    assert s.peak - start > 250 * 2**20
    assert s.peak_anon > 250 * 2**20
    assert loading.ru_maxrss_bytes() >= s.peak * 0.95


def test_planner_prediction_orders_the_methods():
    n1 = {m: loading.planner_prediction("medium", 1, m, shard_bytes=200_000_000) for m in loading.METHODS}
    n2 = {m: loading.planner_prediction("medium", 2, m, shard_bytes=200_000_000) for m in loading.METHODS}
    # naive = meta + a second full copy + the shard it is reading through
    assert n2["naive"]["peak_rank0_gb"] - n2["meta"]["peak_rank0_gb"] == pytest.approx(
        n2["meta"]["keep_gb"] + 0.2
    )
    assert n2["zero3"]["keep_gb"] == pytest.approx(n1["zero3"]["keep_gb"] / 2, rel=1e-6)
    assert n2["zero3-stream"]["peak_rank0_gb"] < n2["zero3"]["peak_rank0_gb"]
    assert n2["zero3"]["peak_other_gb"] < n2["meta"]["peak_other_gb"] < n2["naive"]["peak_other_gb"]


def _row(method, n, rank, peak, **kw):
    base = {
        "method": method,
        "world_size": n,
        "rank": rank,
        "dtype": "bf16",
        "peak_rss_gb": peak,
        "peak_anon_gb": peak,
        "peak_file_gb": 0.0,
        "ru_maxrss_gb": peak,
        "end_rss_gb": peak,
        "used_rss_gb": peak,
        "load_s": 1.0,
        "local_numel": 10 // n,
        "full_numel": 10,
        "model_bytes": 20,
        "weights_match": True,
        "baseline_rss_gb": 0.3,
    }
    return {**base, **kw}


def test_summary_ratios_and_table():
    rows = [
        _row("naive", 2, 0, 2.0),
        _row("naive", 2, 1, 1.8),
        _row("zero3", 2, 0, 1.0),
        _row("zero3", 2, 1, 0.9),
    ]
    summary = loading.summarize(rows, model="tiny")
    assert [r["share"] for r in summary] == [0.5] * 4
    assert all("plan_peak_gb" in r and "plan_load_gb" in r for r in summary)
    assert loading.ratios(summary) == {"naive": [1.0, 1.0], "zero3": [0.5, 0.5]}
    table = loading.format_table(summary)
    assert len(table.splitlines()) == 6 and "zero3" in table and "plan GB" in table


def test_plot_loading_peaks(tmp_path):
    from workshop.report import plots

    rows = [_row("naive", 1, 0, 2.0, peak_anon_gb=1.7), _row("zero3", 2, 0, 1.0), _row("zero3", 2, 1, 0.8)]
    path = plots.plot_loading_peaks(loading.summarize(rows, model="tiny"), tmp_path / "p.png")
    assert path.exists() and path.stat().st_size > 5000


@pytest.mark.slow
def test_pitfalls_happen_and_the_fix_works(ckpt):
    lost, fixed = loading.show_pitfalls(("config-not-kept", "fix"), ckpt, nproc=2)  # one launch, in order
    assert (lost["name"], fixed["name"]) == ("config-not-kept", "fix")
    assert lost["ok"] and not lost["partitioned"] and lost["local_numel"] == lost["full_numel"]
    assert fixed["ok"] and fixed["partitioned"] and fixed["local_numel"] * 2 >= fixed["full_numel"]
    assert fixed["local_numel"] < fixed["full_numel"]
    wrapped = loading.show_pitfall("init-wraps-from-pretrained", ckpt, nproc=1)
    assert not wrapped["ok"] and wrapped["error"]
    with pytest.raises(WorkshopError, match="unknown pitfall"):
        loading.show_pitfall("nope", ckpt)
    with pytest.raises(WorkshopError, match="unknown pitfall that can share a launch 'init-wraps-from-pre"):
        loading.show_pitfalls(("fix", "init-wraps-from-pretrained"), ckpt)  # needs a fresh process of its own


REDUCED_1B = {"num_hidden_layers": 1, "vocab_size": 8192, "bos_token_id": 1, "eos_token_id": 2}


@pytest.mark.slow
@pytest.mark.parametrize("method, nproc", [("naive", 1), ("meta", 1), ("zero3", 2), ("zero3-stream", 2)])
def test_tied_embeddings_load_in_every_method(tmp_path_factory, method, nproc):
    """Each method as chapter 03 runs it, in bf16 (zero.Init with DeepSpeed's bf16 on): ZeRO-3's ranks each
    hold about half and naive and meta the whole model, and every weight, gathered where ZeRO-3 split it,
    equals the file. The checkpoint is llama-3.2-1b's widths, GQA layout and rope scaling at one layer and an
    8k vocab (77.6 M parameters), whose lm_head is tied to the embeddings (safetensors keeps one copy)."""
    from workshop.experiments.loading import run_method, write_checkpoint

    root = tmp_path_factory.getbasetemp() / "llama-3.2-1b-1layer"
    ckpt = write_checkpoint(root, "llama-3.2-1b", dtype="bf16", max_shard_size="100MB", overrides=REDUCED_1B)
    assert len(list(ckpt.glob("*.safetensors"))) >= 2  # sharded, like the hub's
    reports = run_method(ckpt, method, nproc, out_dir=tmp_path_factory.mktemp(method))  # the file's dtype
    assert [r["rank"] for r in reports] == list(range(nproc))
    assert all(r["weights_match"] for r in reports), reports
    full = loading.verify_checkpoint(ckpt).numel
    assert full == 77_600_768 and {r["full_numel"] for r in reports} == {full}  # lm_head tied: counted once
    for r in reports:
        if method.startswith("zero3"):
            assert r["partitioned"] and r["local_numel"] * 2 >= r["full_numel"] > r["local_numel"], r
        else:
            assert not r["partitioned"] and r["local_numel"] == r["full_numel"], r
        assert r["peak_rss_gb"] >= r["baseline_rss_gb"] > 0.05
        assert r["ru_maxrss_gb"] >= r["peak_rss_gb"] * 0.9


def test_preflight_refuses_before_a_checkpoint_is_written(tmp_path, monkeypatch):
    """llama-3-8b, two naive ranks (~66 GB) on a machine with 40 GB free: refused at once, not after minutes
    of writing a 16 GB checkpoint; with 10 GB free even building the model once is refused."""
    import psutil

    from workshop.errors import WorkshopError
    from workshop.experiments.loading import bench

    class Mem:
        available = 40 * 10**9

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Mem())
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    with pytest.raises(
        WorkshopError, match=r"naive loading with 2 ranks needs about 6\d\.\d GB but only 40\.0 GB"
    ):
        bench(tmp_path / "x.json", model="llama-3-8b", world_sizes=(2,), work_dir=tmp_path / "work")
    Mem.available = 10 * 10**9
    with pytest.raises(WorkshopError, match=r"builds the model in memory: about 1\d\.\d GB needed, 10\.0 GB"):
        bench(tmp_path / "x.json", model="llama-3-8b", world_sizes=(1,), work_dir=tmp_path / "work")
    assert not any((tmp_path / "work").rglob("*.safetensors")) and not (tmp_path / "x.json").exists()
