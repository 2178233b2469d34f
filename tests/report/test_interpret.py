"""The sentences chapters print about a run follow the run's numbers (both ways), and name the machine."""

import json
from types import SimpleNamespace

import pytest

from workshop.plan import fit, memory, reconcile
from workshop.report import interpret, predictions


def test_gemm_sentence_follows_the_measured_ratio():
    d = {"cpu_model": "Test CPU", "cores": 2, "isa_class": "avx2", "amx": False, "onednn_bf16_impl": None}
    slow = interpret.gemm({"bf16_over_fp32": 0.02}, d)
    assert "SLOWER" in slow and "fp32" in slow and "Test CPU" in slow
    fast = interpret.gemm(
        {"bf16_over_fp32": 2.1}, {**d, "amx": True, "onednn_bf16_impl": "brg_matmul:avx512_core_amx"}
    )
    assert "x2.10 as fast" in fast and "AMX" in fast and "SLOWER" not in fast
    assert "about the same" in interpret.gemm({"bf16_over_fp32": 1.0}, d)


def _table(naive, stream0, stream1, base=0.4, model_bytes=7e8):
    row = {"world_size": 2, "baseline_rss_gb": base, "model_bytes": model_bytes, "used_rss_gb": None}
    return [
        {**row, "method": "naive", "rank": 0, "peak_rss_gb": naive},
        {**row, "method": "naive", "rank": 1, "peak_rss_gb": naive},
        {**row, "method": "zero3-stream", "rank": 0, "peak_rss_gb": stream0},
        {**row, "method": "zero3-stream", "rank": 1, "peak_rss_gb": stream1},
    ]


def test_loading_names_the_winner_and_warns_when_the_model_is_too_small():
    big = interpret.loading(_table(1.9, 1.0, 0.9))
    assert any("zero3-stream" in line and "x0.53" in line for line in big)
    assert not any("too small" in line for line in big)
    small = interpret.loading(_table(0.45, 0.44, 0.43, model_bytes=1.4e7))
    assert any("too small" in line and "medium" in line for line in small)


def test_threads_sentence_names_a_winner_only_when_the_steps_allow_it():
    rows = [
        {"label": "2 ranks x 1 threads", "threads": 1, "tokens_per_s": 152.6, "samples": [150, 152.6, 155]},
        {"label": "2 ranks x 2 threads", "threads": 2, "tokens_per_s": 176.6, "samples": [170, 176.6, 180]},
    ]
    line = interpret.threads(rows, cores=2, nproc=2)
    assert (
        line.startswith("2 ranks x 2 threads beats 2 ranks x 1 threads by x1.16")
        and "over-subscribed" in line
    )
    # issue 37: one unpaired run each whose per-step values overlap is no win
    overlap = [{**rows[0], "samples": [120, 152.6, 190]}, {**rows[1], "samples": [140, 176.6, 200]}]
    said = interpret.threads(overlap, cores=2, nproc=2)
    assert "within noise on this machine" in said and "won" not in said and "cannot tell" in said
    single = [{**r, "samples": []} for r in rows]
    assert "single sample" in interpret.threads(single, cores=2, nproc=2)


def test_bandwidth_sentence_calls_a_compute_bound_step_compute_bound():
    rate = {"10gbit": 10**10, "1gbit": 10**9, "100mbit": 10**8}.get
    flat = [
        {
            "rate": "10gbit",
            "ok": True,
            "step_time_s_median": 6.52,
            "mb_sent_per_node": [300, 300],
            "steps": 6,
        },
        {"rate": "1gbit", "ok": True, "step_time_s_median": 6.61, "mb_sent_per_node": [300, 300], "steps": 6},
    ]
    out = interpret.bandwidth(flat, parse_rate=rate)
    assert "compute-bound" in out[-1] and "+1%" in out[-1]
    assert "0.40 s on the wire" in out[1]  # 50 MB per step at 1 Gbit
    steep = [flat[0], {**flat[1], "rate": "100mbit", "step_time_s_median": 10.9}]
    # issue 49: one median per cap is no verdict; the steps' own times are
    said = interpret.bandwidth(steep, parse_rate=rate)[-1]
    assert "+67%" in said and "not a verdict" in said and "network shows" not in said
    # issue 49 again: one run per cap, one after the other, is one round: its steps' spread is no verdict
    steps = [{**flat[0], "step_times_s": [6.5, 6.52, 6.55]}, {**steep[1], "step_times_s": [10.8, 10.9, 11.0]}]
    said = interpret.bandwidth(steps, parse_rate=rate)[-1]
    assert "one round: no verdict" in said and "network shows" not in said


def test_bandwidth_separates_start_up_from_the_steady_steps():
    """Issue #28: node 0 sent 28% more than node 1 over a whole run; all of it before the first step ended."""
    rate = {"10gbit": 10**10, "1gbit": 10**9}.get
    rows = [
        {
            "rate": r,
            "ok": True,
            "step_time_s_median": t,
            "mb_sent_per_node": [243.5, 201.1],
            "steps": 8,
            "mb_startup_per_node": [68.5, 26.1],
            "mb_per_step_per_node": [25.0, 25.0],
            "wall_s": w,
        }
        for r, t, w in (("10gbit", 0.31, 21.0), ("1gbit", 0.67, 25.5))
    ]
    out = interpret.bandwidth(rows, parse_rate=rate, model_mb=14.2)
    assert out[0].startswith("10gbit: 25 MB sent per node per step")  # steady bytes, not total / steps
    start = next(line for line in out if line.startswith("start-up"))
    assert "node 0 sent 68 MB, the others 26 MB, +42 MB for node 0" in start and "weights are 14 MB" in start
    assert "25 / 25 MB per step per node" in start
    assert "10gbit 21 s, 1gbit 26 s" in next(line for line in out if line.startswith("wall time"))


def test_original_model_sentences_follow_the_rows():
    R = SimpleNamespace  # noqa: N806 (a row constructor)
    rows = [
        R(
            label="p4d 1 pod",
            instance="p4d",
            pods=1,
            network=None,
            error=0.0,
            measured_s=19.0,
            predicted_s=19.0,
        ),
        R(
            label="p4d 4 pods EFA",
            instance="p4d",
            pods=4,
            network="efa",
            error=-0.2,
            measured_s=47.4,
            predicted_s=37.9,
        ),
        R(
            label="g6e 4 pods EFA?",
            instance="g6e",
            pods=4,
            network="efa",
            error=-0.5,
            measured_s=155.6,
            predicted_s=80.0,
        ),
        R(
            label="g6e 4 pods ENI?",
            instance="g6e",
            pods=4,
            network="eni",
            error=-0.26,
            measured_s=155.6,
            predicted_s=115.7,
        ),
    ]
    out = predictions.original_model(rows)
    assert "p4d 4 pods EFA" in out[0] and "none" in out[1]
    assert "above both predictions" in out[2]


def test_provenance_names_another_machine_as_another():
    stored = {"env": {"cpu_model": "AMD EPYC", "isa_class": "zen4", "torch": "2.13.0"}, "date": "2026-11-22"}
    line = interpret.provenance(stored, here="Intel Xeon Platinum 8488C, 16 cores")
    assert "zen4" in line and "2026-11-22" in line and "another machine" in line


def test_planner_states_the_efa_rule_and_its_price():
    four = fit.recommend("llama-3-8b", nodes=4, source="moto")
    assert any("EFA" in c and "48xlarge" in c for c in four.constraints)
    alt = next(c for c in four.constraints if c.startswith("Without EFA"))
    assert "r7i.2xlarge" in alt and "$2.12/h" in alt and f"${four.hourly_cost_usd:.2f}/h" in alt
    assert all(c in four.reason for c in four.constraints)
    one = fit.recommend("llama-3-8b", nodes=1, source="moto")
    assert not any("EFA" in c for c in one.constraints)


@pytest.mark.parametrize("offload,bpp", [(True, 20), (False, 16)])
def test_one_memory_story_adds_up(offload, bpp):
    plan = memory.plan_memory(
        "llama-3-8b", world_size=4, zero_stage=3, offload_optimizer=offload, offload_param=offload
    )
    r = reconcile.reconcile(plan)
    assert r["model_states_bytes_per_param"] == bpp
    assert sum(x["planner_gib"] for x in r["rows"]) == pytest.approx(r["planner_model_states_gib"], abs=0.05)
    if offload:  # DeepSpeed's estimator: 18 bytes, no bf16 gradient partition
        assert r["deepspeed_bytes_per_param"] == 18
        assert r["deepspeed_model_states_gib"] == pytest.approx(18 * plan.params / 4 / memory.GiB, rel=0.01)
    assert "VIRTUAL" in reconcile.format_reconcile(reconcile.reconcile())


@pytest.mark.parametrize("key", ["peaks", "machine", "env"])
def test_measured_on_reads_every_key_a_result_stores_its_machine_under(key):
    stored = {
        key: {"cpu_model": "Test CPU", "isa_class": "zen4", "cores": 2},
        "measured_at": "2026-11-22 01:59:06",
    }
    assert interpret.measured_on(stored) == "Test CPU zen4, 2 CPUs, 2026-11-22"
    assert (
        "not recorded" in interpret.measured_on({"measured_at": "2026-11-22"})
        and interpret.measured_on(None) == "-"
    )


def test_a_saved_benchmark_names_its_machine(tmp_path):
    from workshop.experiments import measure

    saved = json.loads(
        measure.save("workbook", {"benchmark": "workbook", "total_s": 1.0}, tmp_path).read_text()
    )
    assert saved["machine"]["cpu_model"] and "not recorded" not in interpret.measured_on(saved)


def test_a_share_over_100_percent_blames_the_ceiling_probe_not_the_step():
    """A step 'faster than its own matmuls' means the GEMM probe ran slow; never 'the other -29%'."""
    import copy
    import json

    from workshop.paths import REPO

    res = json.loads((REPO / "benchmarks/results/ceiling.json").read_text())
    said = interpret.ceiling(res)
    assert "The other" in said[-1] and "measured low" not in said[-1]
    over = copy.deepcopy(res)
    for rounds in over["ceilings"].values():  # every probe ran at 40% of its stored rate: the step "beats" it
        for c in rounds:
            c["start"]["tflops"] *= 0.31
            c["end"]["tflops"] *= 0.31
    said = interpret.ceiling(over)
    assert (
        "121-137% of the GEMM ceiling, a range that reaches above it, so no share of it is quoted" in said[0]
        and "measured low" in said[0]
    )
    assert "129%" not in said[0] and "-29%" not in " ".join(said)  # issue 49: no single share above 100 %
    assert "No share is read from this run" in said[-1]


def test_a_drifting_ceiling_gives_a_range_and_no_share():
    """Issue 37: the ceiling moved 126 -> 194 GFLOPS while the step ran; the headline must not say 98%."""
    import copy
    import json

    from workshop.paths import REPO

    res = copy.deepcopy(json.loads((REPO / "benchmarks/results/ceiling.json").read_text()))
    for c in res["ceilings"]["1024xbf16"]:
        c["end"]["tflops"] = c["start"]["tflops"] * 1.54
    said = interpret.ceiling(res)
    assert "is between" in said[0] and "moved from" in said[0] and "The other" not in " ".join(said)
    reach = said[0].split("same cores reach ")[1].split(" TFLOPS")[0]
    assert "-" in reach  # the ceiling itself is quoted as the range its probes spanned, not as one number
    assert "No share is read from this run" in said[-1]


def test_gemm_sentence_names_no_winner_when_the_repeats_overlap():
    d = {"cpu_model": "Test CPU", "cores": 2, "isa_class": "zen4", "amx": False}
    said = interpret.gemm(
        {"bf16_over_fp32": 1.3, "bf16_samples": [1.0, 1.3, 1.6], "fp32_samples": [0.9, 1.0, 1.2]}, d
    )
    assert "within noise" in said and "Train in bf16" not in said
    clear = interpret.gemm(
        {"bf16_over_fp32": 2.0, "bf16_samples": [2.0, 2.1, 1.9], "fp32_samples": [1.0, 1.05, 0.95]}, d
    )
    assert "x2.00 as fast as fp32" in clear


def test_bandwidth_sentence_makes_no_claim_when_the_caps_steps_overlap():
    rate = {"10gbit": 10**10, "1gbit": 10**9}.get
    rows = [
        {"rate": "10gbit", "ok": True, "step_time_s_median": 0.31, "step_times_s": [0.25, 0.31, 0.5]},
        {"rate": "1gbit", "ok": True, "step_time_s_median": 0.47, "step_times_s": [0.3, 0.47, 0.6]},
    ]
    said = interpret.bandwidth(rows, parse_rate=rate)
    assert "one round: no verdict" in said[-1] and "network shows" not in said[-1]
    rows[1]["step_times_s"], rows[1]["step_time_s_median"] = [0.66, 0.67, 0.68], 0.67
    rows[0]["step_times_s"] = [0.30, 0.31, 0.32]
    rows[0]["mb_per_step_per_node"] = rows[1]["mb_per_step_per_node"] = [21.0, 21.0]
    said = interpret.bandwidth(rows, parse_rate=rate)[-1]  # apart, but from one run per cap: no verdict
    assert "one round: no verdict" in said and "The network shows" not in said
    assert "21.0 MB per step at 1gbit need 0.15 s more than 21.0 MB at 10gbit; the step grew 0.36 s" in said


def test_gemm_reason_splits_the_ratio_into_peaks_and_the_rest():
    """Chapter 01 said x4.31 came from "each bf16 instruction does twice the work": twice explains x2 at most.
    The sentence splits the ratio into the peaks' ratio and how far below its own peak each precision ran."""
    d = {"cpu_model": "Test CPU", "cores": 2, "isa_class": "zen5", "amx": False, "onednn_bf16_impl": "k"}
    s = {"bf16_over_fp32": 3.62, "peak_bf16_tflops": 0.33, "peak_fp32_tflops": 0.165}
    said = interpret.gemm(s, d)
    assert "twice the work" not in said
    assert "x2 fp32's" in said and "the other x1.81 is fp32 running further below" in said
    amx = interpret.gemm({**s, "bf16_over_fp32": 9.0, "peak_bf16_tflops": 2.64}, {**d, "amx": True})
    assert "x16 fp32's" in amx and "bf16 ran further below its own peak" in amx and "x1.78" in amx


def _plan(tokens: float, epochs: float | None):
    job = SimpleNamespace(
        model="llama-3-8b",
        weights="hub",
        dataset="wikitext",
        seq_len=512,
        global_batch=8192,
        steps=12208,
        trained_tokens=int(tokens),
        tokens=tokens,
        epochs=epochs,
        zero_stage=2,
        precision="bf16",
        lr=2e-5,
        save_steps=100,
    )
    placement = SimpleNamespace(label="1 x p5.48xlarge", procs_per_node=8, capacity_type="on-demand")
    prediction = SimpleNamespace(hours=0.775, checkpoint_hours=0.13, usd=43.0, bound="compute")
    return SimpleNamespace(
        job=job, placement=placement, prediction=prediction, summary=lambda: {"split": "1x8x2x1x512"}
    )


def test_a_plan_of_many_epochs_says_it_prices_tokens_not_a_sensible_run():
    """Chapter 01's plan said "~41.7 epochs of wikitext" for 1e8 tokens with no caveat: 42 passes over a
    2.4M-token corpus overfit it; the line says the budget prices tokens of a larger corpus."""
    said = predictions.plan_line(_plan(1e8, 41.7))
    assert "~41.7 epochs of wikitext: that many passes over one corpus overfit it" in said
    assert "not a sensible run on wikitext" in said
    assert "overfit" not in predictions.plan_line(_plan(2.4e6, 1.0))


def test_loading_time_is_a_ratio_from_one_load_each_not_a_verdict():
    """Chapter 03 said zero3-stream "pays in time" from one load per method: the seconds are said with their
    one sample, never as a verdict."""
    rows = _table(1.9, 0.96, 0.88)
    rows += [{**rows[2], "method": "zero3", "peak_rss_gb": 1.5}, {**rows[3], "method": "zero3", "rank": 1}]
    for r in rows:
        r["load_s"] = {"naive": 9.0, "zero3": 12.6, "zero3-stream": 44.0}[r["method"]]
    said = [line for line in interpret.loading(rows) if line.startswith("load time")]
    assert said and "zero3-stream 44.0 s, zero3 12.6 s (x3.49)" in said[0] and "not a verdict" in said[0]
    assert not any(w in said[0] for w in ("pays", "costs", "slower", "faster"))
