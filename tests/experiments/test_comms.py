"""Chapter 06: the ZeRO traffic model, the original workshop's table predicted, the collective benchmark, the
pools."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from workshop.cli.experiments import comms as comms_command
from workshop.errors import WorkshopError
from workshop.experiments import comms
from workshop.k8s.placement import placement_pool
from workshop.plan import traffic, zero3
from workshop.plan.topology import ORIGINAL_RUNS, ORIGINAL_STEPS


def test_ring_factor_and_stage3_bytes():
    tr = traffic.zero_traffic(1_000_000, 4, 3, grad_accum=4, bytes_per_param=2, grad_ckpt=True)
    per = 0.75 * 2_000_000  # (N-1)/N of the bf16 buffer
    assert tr.gathers_per_micro == 3
    assert tr.all_gather == pytest.approx(4 * 3 * per)
    assert tr.reduce_scatter == pytest.approx(4 * per)
    assert tr.all_reduce == 0


def test_stages_order_and_ddp():
    b = {s: traffic.zero_traffic(10**6, 8, s, grad_accum=2).collective for s in range(4)}
    assert b[0] == pytest.approx(b[1])  # ZeRO-1 moves what DDP moves: RS + AG == AR
    assert b[0] < b[2] < b[3]


def test_offload_pcie_bytes():
    tr = traffic.zero_traffic(8_000, 4, 3, grad_accum=4, offload_param=True, offload_optimizer=True)
    shard = 8_000 * 2 / 4
    assert tr.pcie_h2d == pytest.approx(4 * 2 * shard)
    assert tr.pcie_d2h == pytest.approx(4 * shard)


def test_step_time_overlap():
    tr = traffic.zero_traffic(10**9, 2, 3)
    full = traffic.step_time(tr, collective_gbytes_per_s=1.0, compute_s=1.0)
    half = traffic.step_time(tr, collective_gbytes_per_s=1.0, compute_s=1.0, overlap=0.5)
    assert full.total_s == pytest.approx(1.0 + tr.collective / 1e9)
    assert half.exposed_s == pytest.approx(full.exposed_s / 2)


def test_seed_claims_hold():
    rows = traffic.original_comparison()
    checks = traffic.original_checks(rows)
    assert checks["ordering_ok"]
    assert checks["p4d_ratio_measured"] == pytest.approx(2372 / 981)
    assert abs(checks["p4d_ratio_error"]) <= 0.30
    assert all(abs(r.error) < 1e-9 for r in rows if r.fitted)  # the only fitted numbers
    assert len(ORIGINAL_RUNS) == 7 and ORIGINAL_STEPS == 50


def test_bad_input_is_a_workshop_error():
    with pytest.raises(WorkshopError, match="ZeRO stage"):
        traffic.zero_traffic(10, 2, 4)
    with pytest.raises(WorkshopError, match="overlap"):
        traffic.step_time(traffic.zero_traffic(10, 2, 3), collective_gbytes_per_s=1, compute_s=0, overlap=1.0)
    with pytest.raises(WorkshopError, match="backend"):
        comms.run_collective_bench(backend="mpi")
    for bad in ({"sizes_mb": (0,)}, {"sizes_mb": ()}, {"iters": 0}):  # refused before torchrun starts
        with pytest.raises(WorkshopError, match="sizes-mb|iters"):
            comms.run_collective_bench(**bad)
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(WorkshopError, match="'nccl' needs CUDA GPUs"):
            comms.run_collective_bench(backend="nccl")


def test_model_cli_writes_json(tmp_path):
    out = tmp_path / "c.json"
    assert comms_command(["model", "--out", str(out)]) == 0
    data = json.loads(out.read_text())["model"]
    assert data["checks"]["ordering_ok"] and len(data["rows"]) == 9


def test_fit_recovers_latency_and_bandwidth():
    rows = [{"op": "all_gather", "bytes": b, "time_s": 1e-3 + b * 0.5 / 2e9} for b in (1e6, 1e7, 1e8)]
    fit = comms.fit_collectives(rows, 2)["all_gather"]
    assert fit["alpha_s"] == pytest.approx(1e-3, rel=1e-6)
    assert fit["gbytes_per_s"] == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("pods,gpus,limit", [(1, 4, 8), (4, 1, 32)])
def test_placement_pools_validate(pods, gpus, limit):
    from workshop.k8s.validate import validate_documents

    docs = placement_pool("p4d.24xlarge", pods, gpus).to_dicts()
    assert validate_documents(docs) == []
    assert docs[0]["spec"]["limits"]["nvidia.com/gpu"] == limit
    with pytest.raises(WorkshopError):
        placement_pool("p4d.24xlarge", 1, 16)


@pytest.mark.slow
def test_gloo_collective_bench_runs():
    res = comms.run_collective_bench(sizes_mb=(0.5, 4), iters=2)
    assert res["world"] == 2 and len(res["results"]) == 6
    assert all(r["busbw_gbytes_per_s"] > 0 for r in res["results"])
    assert set(res["fit"]) == set(comms.OPS)


@pytest.mark.parametrize("trainer", ["2.1.0", "2.3.0"])
@pytest.mark.parametrize("pods,gpus,efa", [(1, 4, 4), (4, 1, 1)])
def test_placement_trainjobs_validate_for_their_trainer(pods, gpus, efa, trainer):
    from workshop.k8s.placement import placement_trainjob
    from workshop.k8s.validate import validate_documents

    spec = placement_trainjob("p4d.24xlarge", pods, gpus, trainer=trainer)
    docs = spec.documents(trainer)
    assert validate_documents(docs, trainer=trainer) == []
    job = docs[0]["spec"]["trainer"]
    assert (job["numNodes"], job["numProcPerNode"]) == (pods, gpus)
    assert job["resourcesPerNode"]["limits"] == {
        "nvidia.com/gpu": str(gpus),
        "vpc.amazonaws.com/efa": str(efa),
    }
    assert "--offload-param" in job["args"] and "--grad-ckpt" in job["args"]
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in job["env"]
    other = "2.1.0" if trainer == "2.3.0" else "2.3.0"
    assert validate_documents(docs, trainer=other)  # each form only fits its own release


def test_placement_trainjob_eni_and_bad_input():
    from workshop.k8s.placement import placement_trainjob

    eni = placement_trainjob("p4d.24xlarge", 4, 1, network="eni").documents("2.3.0")[0]
    limits = eni["spec"]["trainer"]["resourcesPerNode"]["limits"]
    assert "vpc.amazonaws.com/efa" not in limits
    assert not any(e["name"] == "FI_PROVIDER" for e in eni["spec"]["trainer"]["env"])
    with pytest.raises(WorkshopError, match="network"):
        placement_trainjob("p4d.24xlarge", 4, 1, network="ib")
    with pytest.raises(WorkshopError, match="GPUs"):
        placement_trainjob("p4d.24xlarge", 1, 9)


def test_per_step_calls_diffs_snapshots():
    snaps = [
        {"all_gather": [3, 30]},
        {"all_gather": [13, 130]},
        {"all_gather": [23, 230], "barrier": [1, 0]},
        {"all_gather": [33, 330], "barrier": [2, 0]},
    ]
    calls = comms.per_step_calls(snaps)
    assert calls["all_gather"] == {"calls": 10, "bytes": 100}
    assert calls["barrier"]["calls"] == 1


def test_zero3_calls_from_architecture():
    tiny = zero3.zero3_calls("tiny")
    # 4 layers x (q, k, v, o, 2 norms) + final norm stay whole (<= 1e5 elements): one all-gather each after
    # the step; the MLP, embedding and head are fetched in one 5e7-element prefetch bucket, kept for backward
    assert (tiny.persistent_params, tiny.gather_passes, tiny.all_gather_calls) == (25, 1, 26)
    assert tiny.all_gather_waves == 2 and tiny.n_ops == {"all_gather": 2, "reduce_scatter": 1}
    assert tiny.all_gather_bytes == tiny.reduce_scatter_bytes == 2 * tiny.params
    big = zero3.zero3_calls("llama-3-8b", grad_ckpt=True, grad_accum=4)
    assert big.gather_passes == 3  # 8e9 elements > max_reuse_distance: gather again for backward + recompute
    assert big.all_gather_bytes == pytest.approx(2 * (4 * 3 * big.partitioned + big.persistent))


def test_predict_from_single_rank_is_the_planners_step():
    """The 2-rank step from the 1-rank run is the planner's (plan.localcheck.local_step): compute at the
    1-rank rate without its optimizer, the optimizer over DDR, collectives at the fit; the every-call reading
    adds a latency for each all-gather call launched with others (24 for tiny)."""
    from workshop.plan.localcheck import local_step

    base = comms.LocalRun(
        "tiny",
        1,
        False,
        False,
        step_time_s=1.0,
        optimizer_step_s=0.4,
        calls={},
        loopback_bytes_per_step_per_rank=None,
    )
    calls = zero3.zero3_calls("tiny")
    fit = {op: {"alpha_s": 1e-3, "gbytes_per_s": 1.0} for op in comms.OPS}
    p = comms.predict_from_single_rank(base, calls, fit, 2)
    planner = local_step("tiny", 1.0, 0.4, fit=fit["all_gather"])
    assert p["predicted_s"] == planner.step_time_s
    assert p["compute_s"] == pytest.approx(0.6)  # the 1-rank step less its optimizer, at the same FLOPs
    assert p["predicted_s"] == pytest.approx(p["compute_s"] + p["comm_s"] + p["optimizer_s"])
    assert p["predicted_if_every_call_waits_s"] - p["predicted_s"] == pytest.approx(24 * 1e-3)
    slower = local_step("tiny", 1.0, 0.4, fit={"alpha_s": 1e-3, "gbytes_per_s": 0.5})
    assert slower.comm_s > planner.comm_s and slower.compute_s == planner.compute_s
    fp32 = comms.predict_from_single_rank(replace(base, precision="fp32"), calls, fit, 2)
    assert fp32["comm_s"] > p["comm_s"] and fp32["compute_s"] == p["compute_s"]  # fp32 gathers: more bytes


def test_chapters_01_and_06_print_one_prediction_of_the_stored_local_step():
    """Issue 49: chapter 06 printed 0.253 s and chapter 01's table 0.2614 s for the same stored 2-rank tiny
    step (two models). Both now come from plan.localcheck.local_step, re-made at read time."""
    from workshop.paths import REPO
    from workshop.plan import localcheck

    stored = json.loads((REPO / "benchmarks/results/comms.json").read_text())
    ch06 = {r["model"]: r for r in comms.stored_local(stored) if not r["offload"]}
    ch01 = {r.check.rsplit(", ", 1)[1]: r for r in localcheck.local_rows()[:2]}
    assert set(ch01) == {"tiny", "small"}
    for model, row in ch01.items():
        assert ch06[model]["predicted_s"] == pytest.approx(row.predicted, rel=1e-12)
        assert ch06[model]["measured_s"] == row.measured


def test_netsim_check_swaps_only_the_collective_time():
    def fit(a, b):
        return {op: {"alpha_s": a, "gbytes_per_s": b} for op in comms.OPS}

    bench = {
        "mode": "netns",
        "rates": {
            "10gbit": {"world": 2, "fit": fit(1e-3, 1.0)},
            "1gbit": {"world": 2, "fit": fit(5e-3, 0.1)},
        },
    }
    netsim = {
        "table": [
            {"rate": "10gbit", "ok": True, "step_time_s_median": 0.3},
            {"rate": "1gbit", "ok": True, "step_time_s_median": 0.6},
        ]
    }
    out = comms.netsim_check(bench, netsim)
    slow = next(r for r in out["rows"] if r["rate"] == "1gbit")
    calls = zero3.zero3_calls("tiny")
    wire = 0.5 * (calls.all_gather_bytes + calls.reduce_scatter_bytes)
    assert slow["predicted_s"] == pytest.approx(0.3 + 3 * 4e-3 + wire / 1e8 - wire / 1e9)
    with pytest.raises(WorkshopError, match="two caps"):
        comms.netsim_check(bench, {"table": netsim["table"][:1]})


@pytest.mark.slow
def test_counted_calls_match_the_architecture(tmp_path):
    run = comms.run_training("tiny", world=2, steps=3, out_dir=tmp_path)
    from workshop.plan.hardware import resolve_precision

    assert run.precision == resolve_precision("auto")[0]  # the default: bf16 only where it is native
    model = zero3.zero3_calls("tiny", bytes_per_param=run.bytes_per_param)
    assert run.calls["all_gather_into_tensor"] == {
        "calls": model.all_gather_calls,
        "bytes": model.all_gather_bytes,
    }
    assert run.calls["reduce_scatter_tensor"]["calls"] == model.reduce_scatter_calls
    assert run.step_time_s > 0 and 0 < run.optimizer_step_s < run.step_time_s


# One stored pair of small ZeRO-3 runs, with and without offload (chapter 06's comms.json "local" rows).
STORED_OFFLOAD_RUNS = {
    "env": {"cpu_model": "Test CPU", "cpus": 2},
    "date": "2026-11-22",
    "local": [
        {"model": "small", "offload": False, "measured_s": 2.29},
        {"model": "small", "offload": True, "measured_s": 1.85},
    ],
}


def test_one_place_says_what_offload_does_on_a_cpu():
    """Issue 37: chapter 04 said offload "only adds copies" while chapter 06's runs showed it faster."""
    from workshop.experiments.comms import offload_on_cpu

    said = offload_on_cpu(STORED_OFFLOAD_RUNS)
    assert "fused CPU Adam" in said and "1.85 s per step with offload, 2.29 s without" in said
    assert "Test CPU" in said and "2026-11-22" in said and "only adds copies" not in said


def test_the_cpu_adam_sentence_agrees_with_the_stored_lever_table():
    """Issue 49: chapter 04 said CPU Adam "can make the step faster" beside a lever table whose CPU Adam row,
    re-judged, is within noise: the sentence gives one run each as no verdict and the table's judgement."""
    from workshop.experiments.comms import offload_on_cpu

    said = offload_on_cpu(STORED_OFFLOAD_RUNS)
    assert "can make the step faster" not in said and "one run each, no verdict" in said
    assert "ZeRO-3 + DeepSpeed CPU Adam vs ZeRO-3 engine: within noise" in said and "2026-11-25" in said


def test_chapter_06_sets_this_runs_netsim_beside_the_stored_one(tmp_path):
    """Issue 37: the stored 1 Gbit slowdown (and its 'open question') is that machine's; this run's chapter 05
    says whether it reproduced."""
    from workshop.experiments.comms import netsim_reproduced

    stored = {
        "env": {"cpu_model": "Stored CPU"},
        "date": "2026-11-22",
        "netsim": {"rows": [{"rate": "10gbit", "measured_s": 0.31}, {"rate": "1gbit", "measured_s": 0.67}]},
    }
    assert "chapter 05 has not run here" in netsim_reproduced(stored, tmp_path / "missing.json")[0]
    live = tmp_path / "report.json"
    rows = [("10gbit", 0.47), ("1gbit", 0.66)]
    live.write_text(
        json.dumps({"table": [{"rate": r, "ok": True, "step_time_s_median": s} for r, s in rows]})
    )
    os.utime(live, (1795000000, 1795000000))  # an output folder keeps chapter 05's report from an earlier run
    said = netsim_reproduced(stored, live)
    when = "2026-11-18 11:06 UTC"  # issue 49: its time, never "this run"
    assert said[0].startswith(
        f"10gbit: chapter 05's run of {when} 0.47 s/step, stored 0.31 s/step (Stored CPU"
    )
    growth = next(line for line in said if line.startswith("10gbit -> 1gbit"))
    assert (
        f"grew 0.19 s in chapter 05's run of {when} and 0.36 s in the stored one (Stored CPU, 2026-11-22)"
        in growth
    )
    assert not any("this run" in line for line in said[:-1])
    assert "one run of each: NOT the stored growth" in growth
    # issue 49: "reproduced" was judged on the ratio, which a run matching the planner (0.22 -> 0.40 s against
    # 0.31 -> 0.67 s) passed; the stored story is about seconds the step lost, so the growth is compared
    live.write_text(
        json.dumps(
            {
                "table": [
                    {"rate": "10gbit", "ok": True, "step_time_s_median": 0.2211},
                    {"rate": "1gbit", "ok": True, "step_time_s_median": 0.3971},
                ]
            }
        )
    )
    growth = next(line for line in netsim_reproduced(stored, live) if line.startswith("10gbit -> 1gbit"))
    assert "NOT the stored growth" in growth and "reproduced" not in growth
    # and chapter 01's planner on the same stored steps is set beside, with its method
    planner = netsim_reproduced(stored, live)[-1]
    assert planner.startswith(
        "chapter 01's planner predicts the same stored steps (Stored CPU, 2026-11-22) as"
    )
    assert "10gbit 0.22 s/step" in planner
    assert "two methods, so two predictions of one measurement" in planner


def test_the_worker_reads_the_flags_a_node_launcher_appends():
    """netsim's node launcher appends --threads and --output-dir after the collective worker's JSON spec."""
    from workshop.experiments.comms.collectives import launcher_flags

    assert launcher_flags(["--threads", "1", "--output-dir", "/o"]) == {"threads": "1", "output_dir": "/o"}
    for bad in (["--threads"], ["threads", "1"]):
        with pytest.raises(WorkshopError, match="--name value pairs"):
            launcher_flags(bad)
