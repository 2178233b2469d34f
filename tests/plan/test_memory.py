"""Memory planner: exact counts, the original workshop's measured ZeRO-3 log, DeepSpeed's estimator, a real
forward pass."""

import json

import pytest

from workshop.cli import plan as plan_cli
from workshop.errors import WorkshopError
from workshop.plan import fit, memory, reconcile
from workshop.plan.memory import GiB


def test_exact_parameter_count_from_meta_device():
    arch = memory.architecture("llama-3-8b")
    assert arch.params == 8_030_261_248
    assert arch.largest_layer_params == 128256 * 4096  # embedding (untied lm_head is the same size)


def test_plan_matches_seed_log_after_calibration_stage():
    """Only the first line calibrates the runtime term; the later stages are predictions."""
    rows = {r["stage"]: r for r in reconcile.original_comparison()}
    assert rows["Stage 3 initialize beginning"]["plan_gib"] == pytest.approx(4.81, abs=0.01)
    for stage in (
        "After creating fp32 partitions",
        "After initializing optimizer states",
        "After initializing ZeRO optimizer",
    ):
        assert abs(rows[stage]["diff_pct"]) < 6, rows[stage]
    plan = memory.plan_memory(**reconcile.ORIGINAL_RUN)
    assert plan.at_zero_init / GiB == pytest.approx(24.47, rel=0.06)
    # host total: 4 ranks + the original host's own idle baseline (used at start minus 4 x 4.81 GiB)
    baseline = (
        reconcile.ORIGINAL_HOST_USED_GIB["start"]
        - 4 * reconcile.ORIGINAL_STAGES_GIB["Stage 3 initialize beginning"]
    )
    assert 4 * plan.at_zero_init / GiB + baseline == pytest.approx(104.54, rel=0.06)
    # the original workshop's line is before the first step: Adam's moments come on top of it
    assert plan.total > plan.at_zero_init + 14 * GiB


def test_model_states_agree_with_deepspeed_estimator():
    ds = reconcile.deepspeed_estimate("llama-3-8b", nodes=1, procs_per_node=4)
    plan = memory.plan_memory(**reconcile.ORIGINAL_RUN)
    states = sum(
        plan.components[k] for k in ("params", "grads", "master_fp32", "adam_moments", "optimizer_grads_fp32")
    )
    # DeepSpeed counts 18 bytes/param with offload; we count a bf16 gradient partition too (20)
    assert states / ds["host_per_rank"] == pytest.approx(20 / 18, rel=0.02)
    gpu_ds = reconcile.deepspeed_estimate(
        "llama-3-8b", nodes=2, procs_per_node=8, offload_optimizer=False, offload_param=False
    )
    gpu = memory.plan_memory("llama-3-8b", world_size=16, procs_per_node=8, device="gpu")
    dev_states = gpu.device_bytes - gpu.components["activations"] - gpu.components["cuda_context"]
    assert dev_states / gpu_ds["device_per_rank"] == pytest.approx(1.0, abs=0.15)


def test_activation_formula_matches_saved_tensors_of_a_real_forward():
    import torch
    from transformers import AutoModelForCausalLM

    from workshop.plan.models import build_config

    arch = memory.architecture("tiny")
    for ckpt in (False, True):
        torch.manual_seed(0)
        net = AutoModelForCausalLM.from_config(build_config("tiny"), attn_implementation="sdpa").to(
            torch.bfloat16
        )
        net.train()
        if ckpt:
            enable = (
                getattr(net, "activation_checkpointing_enable", None) or net.gradient_checkpointing_enable
            )
            enable()
        params = {p.untyped_storage().data_ptr() for p in net.parameters()}
        saved = {}

        def pack(t, params=params, saved=saved):
            st = t.untyped_storage()
            if st.data_ptr() not in params:
                saved[st.data_ptr()] = st.nbytes()
            return t

        ids = torch.randint(0, arch.vocab, (2, 64))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            net(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        predicted = memory.activation_bytes(arch, 2, 64, ckpt)["saved"]
        assert sum(saved.values()) == pytest.approx(predicted, rel=0.15), ckpt


def test_zero_stages_partition_in_order():
    kw = {"world_size": 8, "device": "cpu"}
    plans = [memory.plan_memory("llama-3.2-1b", zero_stage=s, **kw) for s in range(4)]
    assert [p.components["adam_moments"] for p in plans][1:] == [plans[1].components["adam_moments"]] * 3
    assert plans[0].components["adam_moments"] == 8 * plans[0].params
    assert (
        plans[1].components["grads"] == 2 * plans[1].params
        and plans[2].components["grads"] < plans[1].components["grads"]
    )
    assert plans[3].components["params"] == pytest.approx(2 * plans[3].params / 8, abs=1)
    ck = memory.plan_memory("llama-3-8b", world_size=4, grad_ckpt=True).components["activations"]
    assert ck < memory.plan_memory("llama-3-8b", world_size=4).components["activations"] / 2


def test_gpu_placement_follows_offload_flags():
    on = memory.plan_memory(
        "llama-3-8b", world_size=8, device="gpu", offload_optimizer=True, offload_param=True
    )
    off = memory.plan_memory("llama-3-8b", world_size=8, device="gpu")
    assert on.placement["adam_moments"] == "host" and off.placement["adam_moments"] == "device"
    assert on.device_bytes < off.device_bytes and on.host_bytes > off.host_bytes


def test_bad_plan_input():
    with pytest.raises(WorkshopError, match="model preset"):
        memory.plan_memory("llama-9b", world_size=1)
    with pytest.raises(WorkshopError, match="world_size"):
        memory.plan_memory("tiny", world_size=0)
    with pytest.raises(WorkshopError, match="stage 3"):
        memory.plan_memory("tiny", world_size=2, zero_stage=2, offload_param=True)
    with pytest.raises(WorkshopError, match="ZeRO stage"):
        memory.plan_memory("tiny", world_size=2, zero_stage=4)


def test_recommend_seed_run_and_multinode():
    rec = fit.recommend(
        "llama-3-8b", nodes=1, procs_per_node=4, offload_optimizer=True, offload_param=True, source="moto"
    )
    assert rec.instance_type in rec.instance_types and rec.nodes == 1 and rec.procs_per_node == 4
    need = 4 * rec.plan.total / GiB * 1.2
    assert int(rec.memory_request.removesuffix("Gi")) >= need and rec.allocatable_gib >= need
    assert rec.hourly_cost_usd is not None and int(rec.cpu_request) >= 4
    assert rec.shm_size.endswith("Gi")
    four = fit.recommend("llama-3-8b", nodes=4, source="moto")
    assert all(t.endswith(("48xlarge", "48xl")) for t in four.instance_types)  # EFA sizes only
    assert four.hourly_cost_usd == pytest.approx(4 * four.node_hourly_usd)


def test_recommend_gpu_and_nothing_fits():
    rec = fit.recommend("llama-3-8b", nodes=2, families=["p4d", "p5", "g6e"], source="moto")
    assert rec.device == "gpu" and rec.procs_per_node == rec.gpus_per_node
    assert rec.plan.device_bytes / GiB * 1.2 <= memory_gpu_gib(rec.instance_type)
    with pytest.raises(WorkshopError, match="nothing fits.*g6e"):
        fit.recommend("llama-3-8b", nodes=1, procs_per_node=1, families=["g6e"], source="moto")
    with pytest.raises(WorkshopError, match="nodes"):
        fit.recommend("tiny", nodes=0)
    with pytest.raises(WorkshopError, match="did you mean"):
        fit.recommend("tiny", nodes=1, families=["r7x"], source="moto")


def memory_gpu_gib(instance_type):
    from workshop.plan.catalog import instance_info

    return instance_info(instance_type, source="moto").gpu_memory_gib


def test_cli_json(capsys):
    assert (
        plan_cli.plan(
            [
                "--memory",
                "--model",
                "llama-3-8b",
                "--nodes",
                "1",
                "--procs-per-node",
                "4",
                "--offload-optimizer",
                "--offload-param",
                "--source",
                "moto",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == 8_030_261_248
    # what stays, plus the larger phase (the two never coexist)
    assert out["per_rank_bytes"] == sum(out["components"].values()) - min(out["phases"].values())
    assert out["recommendation"]["instance_type"]


def test_one_place_says_when_adams_moments_appear():
    """Issue 37: chapter 04 read the original log's +7.5 GiB as "two fp32 moments"; the moments come at the
    first step and that jump is the offloaded optimizer's fp32 gradient buffer (chapter 01's table)."""
    said = reconcile.original_log_reading()
    states = next(line for line in said if line.startswith("After initializing optimizer states"))
    assert "optimizer_grads_fp32" in states and "adam_moments" not in states and "+7.48" in states
    assert said[-1].startswith("adam_moments") and "first step" in said[-1]
    assert "first step" in {t: line for t, _b, _d, line in reconcile.RECONCILE_TERMS}["adam_moments"]


def test_one_place_says_why_zero3_bytes_differ_by_transport():
    """Issue 37: 36.1 GB per step in chapter 04 (NCCL) and 48.2 GB in chapter 01 (gloo), from one function."""
    from workshop.plan import zero

    said = zero.bytes_by_transport("llama-3-8b", 4)
    assert "36.1 GB per step" in said and "48.2 GB over gloo" in said and "as an all-reduce" in said
    sent = {r["stage"]: r["sent_gb_per_step"] for r in zero.stages("llama-3-8b", 4)}
    assert f"{sent[3]:.1f} GB" in said  # the stage table chapter 04 prints says the same number


def test_each_stack_has_its_own_activation_model():
    arch = memory.architecture("llama-3-8b")
    acts = {a: memory.activation_bytes(arch, 1, 8192, False, 2, a)["saved"] for a in memory.ACTIVATIONS}
    # eager attention keeps every head's seq x seq fp32 softmax and bf16 probabilities on top of SDPA's
    assert acts["hf-eager"] - acts["hf-sdpa"] == 6 * arch.heads * 8192 * 8192 * arch.layers
    assert acts["tuned"] < 0.75 * acts["hf-sdpa"]  # fused norms, SwiGLU and cross-entropy
    full = {a: memory.activation_bytes(arch, 1, 8192, True, 2, a)["saved"] for a in memory.ACTIVATIONS}
    assert all(full[a] < acts[a] / 5 for a in acts)  # full recompute keeps only each layer's input
    plan = memory.plan_memory("llama-3-8b", world_size=8, seq_len=8192, device="gpu", activations="tuned")
    assert plan.activations == "tuned" and "[tuned]" in plan.explain()
    with pytest.raises(WorkshopError, match="activation model"):
        memory.plan_memory("llama-3-8b", world_size=8, activations="flash")


ADAM_STEP_PROBE = """
import re, torch
def status(key):  # kB in /proc/self/status
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
n = 8 * 2**20
p = torch.nn.Parameter(torch.zeros(n))
p.grad = torch.ones(n)
opt = torch.optim.AdamW([p], lr=1e-3)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # peak RSS (VmHWM) := current RSS
rss = status("VmRSS")
opt.step()
kept = status("VmRSS") - rss
print(kept / n, (status("VmHWM") - rss - kept) / n)
"""


def test_adamw_step_on_a_cpu_builds_two_fp32_temporaries_per_parameter():
    """Issue 47's missing term, measured: torch's AdamW on a CPU (the single-tensor path) keeps the two
    moments (8 B per parameter) and, during the step only, sqrt(v) and its quotient (ADAM_TEMP_BYTES)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, **memory.LIVE_BYTES_ENV, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", ADAM_STEP_PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    kept, transient = map(float, out.stdout.split())
    assert kept == pytest.approx(8, rel=0.1)  # exp_avg + exp_avg_sq
    assert transient == pytest.approx(memory.ADAM_TEMP_BYTES["cpu"], rel=0.15)


def test_peak_is_what_stays_plus_the_larger_phase():
    """Activations and gathered layers are freed before the optimizer step builds its fp32 gradient and
    AdamW's temporaries: the total counts the larger phase, and only the offloaded optimizer has no temps."""
    kw = {"world_size": 2, "micro_batch": 4, "seq_len": 64}
    plan = memory.plan_memory("tiny", **kw)
    c, ph = plan.components, plan.phases()
    assert ph == {
        "forward_backward": c["activations"] + c["gathered_params"],
        "step": c["optimizer_grads_fp32"] + c["optimizer_temps"],
    }
    kept = sum(c.values()) - sum(ph.values())
    assert plan.total == kept + max(ph.values()) == plan.stages()[-1][1]
    stepped = -(-plan.params // 2)  # ZeRO-3: one sub-group of this rank's partition
    assert c["optimizer_temps"] == 8 * stepped and c["optimizer_grads_fp32"] == 4 * stepped
    gpu = memory.plan_memory("llama-3-8b", world_size=16, procs_per_node=8, device="gpu")
    assert gpu.components["optimizer_temps"] == 4 * -(-gpu.params // 16)  # foreach: one sqrt list
    off = memory.plan_memory(**reconcile.ORIGINAL_RUN)
    assert off.components["optimizer_temps"] == 0 and off.phases()["step"] == 0
    # stages 1-2 step the whole partition: its fp32 gradient is built then too, and the 16-bit gradients
    # it was copied from are freed (stage 3 keeps its flat gradient buffer)
    two = memory.plan_memory("llama-3-8b", world_size=8, zero_stage=2)
    assert two.components["optimizer_grads_fp32"] == 4 * -(-two.params // 8)
    assert two.phases()["forward_backward"] == sum(two.components[k] for k in ("activations", "grads"))
    assert two.total == two.stages()[-1][1] and "16-bit gradients" in two.phase_note()
    # the measured tiny runs (issue 47): one rank saves 135 MiB with LoRA, two ranks 51 MiB each
    lora = {w: memory.plan_memory("tiny", method="lora", **{**kw, "world_size": w}) for w in (1, 2)}
    full = {w: memory.plan_memory("tiny", **{**kw, "world_size": w}) for w in (1, 2)}
    assert (full[1].total - lora[1].total) / 2**20 == pytest.approx(135, rel=0.1)
    assert (full[2].total - lora[2].total) / 2**20 == pytest.approx(51, rel=0.15)
    kw2 = {**kw, "zero_stage": 2}  # ZeRO-2 on two ranks: 43.5 MiB measured
    saved2 = memory.plan_memory("tiny", **kw2).total - memory.plan_memory("tiny", method="lora", **kw2).total
    assert saved2 / 2**20 == pytest.approx(43.5, rel=0.15)
