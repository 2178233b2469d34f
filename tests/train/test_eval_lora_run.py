"""Evaluation and LoRA for real: a tiny run's held-out loss falls and reaches the METRIC lines and the
TensorBoard events; a LoRA run on 2 ranks with ZeRO-3 trains only its adapters, holds less per rank by the
margin the planner predicts, and its saved adapter reloads to the same held-out loss."""

import json
import math
import subprocess
import sys

import pytest

from workshop.launch.torchrun import run_torchrun

pytestmark = pytest.mark.slow


def tiny(tmp_path, kit_cache, name, steps, *extra):
    return [
        "--model", "tiny", "--max-steps", str(steps), "--seq-len", "64", "--micro-batch", "4",
        "--output-dir", str(tmp_path / name), "--cache-dir", str(kit_cache), *extra,
    ]  # fmt: skip


def test_held_out_loss_and_perplexity_fall_and_reach_tensorboard(tmp_path, kit_cache):
    from workshop.train.events import read_events
    from workshop.train.logs import parse_metrics

    argv = tiny(tmp_path, kit_cache, "run", 12, "--eval-fraction", "0.05", "--eval-steps", "4")
    r = subprocess.run(
        [sys.executable, "-m", "workshop.train", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    evals = [s for s in parse_metrics(r.stdout) if "eval_loss" in s]
    assert [s["step"] for s in evals] == [4, 8, 12]
    losses = [s["eval_loss"] for s in evals]
    assert losses[0] > losses[1] > losses[2], losses  # falling at every evaluation
    for s in evals:
        assert s["eval_perplexity"] == pytest.approx(math.exp(s["eval_loss"]), rel=1e-3)
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["final_eval_loss"] == losses[-1] and m["eval_samples"] > 0
    assert "eval_samples=" in r.stdout and f"held-out loss {losses[-1]}" in r.stdout
    events = read_events(tmp_path / "run" / "tensorboard")
    assert [v for _, v in events["eval/loss"]] == pytest.approx(losses, abs=1e-4)
    assert [s for s, _ in events["train/loss"]] == list(range(1, 13))
    assert {"train/tokens_per_s", "train/lr", "eval/perplexity"} <= set(events)


def held_out_loss(model, blocks, batch: int) -> float:
    """The mean batch loss over the held-out blocks, as the Trainer computes it (full global batches)."""
    import torch

    ids = torch.tensor(blocks["input_ids"])
    n = len(ids) // batch * batch
    with torch.no_grad():
        losses = [float(model(input_ids=x, labels=x).loss) for x in ids[:n].split(batch)]
    return sum(losses) / len(losses)


def test_lora_trains_adapters_only_saves_less_memory_as_planned_and_reloads(tmp_path, kit_cache):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from workshop.plan.memory import LIVE_BYTES_ENV, lora_params, plan_memory
    from workshop.plan.models import architecture
    from workshop.train.data import as_text, load_text, split_held_out, tokenize_dataset

    common = ("--eval-fraction", "0.05", "--eval-steps", "5", "--precision", "bf16")
    # both measured as the planner counts: live bytes (freed buffers leave RSS at once)
    ranks = dict(nproc_per_node=2, threads_per_rank=1, progress=False, env=LIVE_BYTES_ENV)
    full = run_torchrun(tiny(tmp_path, kit_cache, "full", 10, *common), **ranks).check()
    lora = run_torchrun(
        tiny(tmp_path, kit_cache, "lora", 10, *common, "--method", "lora", "--lr", "1e-2", "--save-model"),
        **ranks,
    ).check()
    n = lora_params(architecture("tiny"))
    assert lora.metrics["trainable_params"] == n == 147_968
    assert full.metrics["trainable_params"] == full.metrics["params"]
    assert f"trainable parameters {n:,} of " in lora.log
    final = tmp_path / "lora" / "final"
    saved = load_file(final / "adapter_model.safetensors")
    assert sum(t.numel() for t in saved.values()) == n and all("lora_" in k for k in saved)
    # the adapter reloads onto its saved base and gives the run's final held-out loss
    losses = [s["eval_loss"] for s in lora.metrics["steps"] if "eval_loss" in s]
    assert losses[-1] < losses[0], losses
    tok = AutoTokenizer.from_pretrained(final)
    base = AutoModelForCausalLM.from_pretrained(final / "base", dtype=torch.bfloat16)
    model = PeftModel.from_pretrained(base, final).eval()
    _, held = split_held_out(load_text("local", kit_cache), 0.05, 0)
    blocks = tokenize_dataset(as_text(held, tok), tok, seq_len=64)
    assert held_out_loss(model, blocks, batch=4 * 2) == pytest.approx(
        lora.metrics["final_eval_loss"], abs=0.02
    )
    # per-rank memory: LoRA's peak is below full fine-tuning's by the planner's margin, within 25 % either
    # way (issue 47: 51 MiB measured against 47 planned on a 2-core AMD EPYC, 2026-11-28; the margin is the
    # full run's optimizer state and step buffers, AdamW's temporaries included, less nothing of LoRA's)
    kw = dict(world_size=2, micro_batch=4, seq_len=64, dtype="bf16")
    predicted = plan_memory("tiny", **kw).total - plan_memory("tiny", method="lora", **kw).total
    measured = [
        (f - lo) * 2**30
        for f, lo in zip(full.metrics["peak_rss_gb_per_rank"], lora.metrics["peak_rss_gb_per_rank"])
    ]
    mean = sum(measured) / 2
    assert 0.75 * predicted <= mean <= 1.25 * predicted, (measured, predicted)


def test_lora_with_ddp_in_a_plain_process_merges_on_request(tmp_path, kit_cache):
    import torch
    from transformers import AutoModelForCausalLM

    argv = tiny(tmp_path, kit_cache, "ddp", 3, "--engine", "ddp", "--method", "lora", "--lora-targets",
                "q_proj,v_proj", "--save-model", "--merge", "--precision", "fp32")  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "workshop.train", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert m["trainable_params"] == 4 * 8 * ((256 + 256) + (256 + 128))  # r x (in + out) on q and v
    final = tmp_path / "ddp" / "final"
    merged = AutoModelForCausalLM.from_pretrained(final / "merged")
    base = AutoModelForCausalLM.from_pretrained(final / "base")
    q = "model.layers.0.self_attn.q_proj.weight"
    k = "model.layers.0.self_attn.k_proj.weight"
    # q moved by the merged update, k (not a target) is the frozen base's
    assert not torch.equal(merged.state_dict()[q], base.state_dict()[q])
    assert torch.equal(merged.state_dict()[k], base.state_dict()[k])
