"""The fine-tuning path for real, offline: a tiny model + its tokenizer in the hub cache layout, loaded with
HF_HUB_OFFLINE=1 by exactly the code a TrainJob runs (`python -m workshop.train --model org/name`), trained
on 2 ranks with ZeRO-3 (fp32: this CPU has no fast bf16), saved, reloaded with from_pretrained, resumed."""

import os
import subprocess
import sys

import pytest

from workshop.launch.torchrun import run_torchrun

pytestmark = pytest.mark.slow

HUB_ID = "workshop-test/tiny-llama"
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, kit_cache):
    """HF_HUB_CACHE/models--workshop-test--tiny-llama/{refs/main, snapshots/<rev>/...}: what `hf download`
    leaves behind, built here from the tiny preset (random weights, the local tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM

    from workshop.plan.models import build_config
    from workshop.train.data import local_kit

    cache = tmp_path_factory.mktemp("hub")
    repo = cache / "models--workshop-test--tiny-llama"
    snap = repo / "snapshots" / REVISION
    _, tok = local_kit(kit_cache)
    torch.manual_seed(1)
    cfg = build_config(
        "tiny",
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    AutoModelForCausalLM.from_config(cfg).save_pretrained(snap)
    tok.save_pretrained(snap)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return cache


def offline_env(hub_cache):
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache), "HF_TOKEN": ""}


def test_hub_model_fine_tunes_offline_saves_reloads_and_resumes(tmp_path, hub_cache, kit_cache):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "run"
    argv = [
        "--model",
        HUB_ID,
        "--precision",
        "fp32",
        "--seq-len",
        "64",
        "--micro-batch",
        "2",
        "--lr",
        "2e-5",
        "--grad-accum",
        "2",
        "--output-dir",
        str(out),
        "--cache-dir",
        str(kit_cache),
        "--save-steps",
        "2",
        "--save-total-limit",
        "2",
        "--save-model",
        "--resume",
    ]
    first = run_torchrun(
        argv + ["--max-steps", "4"],
        nproc_per_node=2,
        threads_per_rank=1,
        progress=False,
        env=offline_env(hub_cache),
    ).check()
    m = first.metrics
    assert m["world_size"] == 2 and m["global_step"] == 4 and m["resumed_from"] is None
    assert m["args"]["model"] == HUB_ID and m["partition"]["world_size"] == 2  # ZeRO-3 really sharded it
    snap = hub_cache / "models--workshop-test--tiny-llama" / "snapshots" / REVISION
    # the model's own tokenizer, not the locally trained kit: same vocabulary as the snapshot's
    assert m["params"] == sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(snap).parameters())
    # ZeRO-3 gathered the whole weights on rank 0: an ordinary from_pretrained directory
    final = out / "final"
    assert m["final_model"] == str(final) and (final / "model.safetensors").is_file()
    trained = AutoModelForCausalLM.from_pretrained(final)
    original = AutoModelForCausalLM.from_pretrained(snap)
    tok = AutoTokenizer.from_pretrained(final)
    assert len(tok) == len(AutoTokenizer.from_pretrained(snap))
    sd_t, sd_o = trained.state_dict(), original.state_dict()
    assert sd_t.keys() == sd_o.keys() and all(sd_t[k].shape == sd_o[k].shape for k in sd_t)
    assert any(not torch.equal(sd_t[k], sd_o[k]) for k in sd_t)  # it trained
    batch = tok(["The quick brown fox jumps over the lazy dog."], return_tensors="pt")
    with torch.no_grad():
        loss = trained(**batch, labels=batch["input_ids"]).loss
    assert torch.isfinite(loss)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]

    # a restarted job (same arguments, longer run) continues from the newest checkpoint on the volume
    again = run_torchrun(
        argv + ["--max-steps", "6"],
        nproc_per_node=2,
        threads_per_rank=1,
        progress=False,
        env=offline_env(hub_cache),
    ).check()
    assert again.metrics["resumed_from"].endswith("checkpoint-4") and again.metrics["global_step"] == 6
    assert [s["step"] for s in again.metrics["steps"]] == [5, 6]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-6"]  # limit 2


def test_uncached_hub_model_offline_fails_in_plain_words(tmp_path, hub_cache):
    env = {**os.environ, **offline_env(hub_cache)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "workshop.train",
            "--model",
            "meta-llama/Meta-Llama-3-8B",
            "--precision",
            "fp32",
            "--max-steps",
            "1",
            "--output-dir",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert "meta-llama/Meta-Llama-3-8B is not in the hub cache" in r.stderr and "HF_HUB_OFFLINE" in r.stderr
    assert "Traceback" not in r.stderr
