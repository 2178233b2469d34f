"""Chapter 06: the ZeRO traffic model, the seed-table predictions, the collective benchmark, the pools."""

from __future__ import annotations

import json

import pytest

from workshop import comms
from workshop.errors import WorkshopError
from workshop.topology import SEED_RUNS, SEED_STEPS, placement_pool


def test_ring_factor_and_stage3_bytes():
    tr = comms.zero_traffic(1_000_000, 4, 3, grad_accum=4, bytes_per_param=2, grad_ckpt=True)
    per = 0.75 * 2_000_000  # (N-1)/N of the bf16 buffer
    assert tr.gathers_per_micro == 3
    assert tr.all_gather == pytest.approx(4 * 3 * per)
    assert tr.reduce_scatter == pytest.approx(4 * per)
    assert tr.all_reduce == 0


def test_stages_order_and_ddp():
    b = {s: comms.zero_traffic(10**6, 8, s, grad_accum=2).collective for s in range(4)}
    assert b[0] == pytest.approx(b[1])  # ZeRO-1 moves what DDP moves: RS + AG == AR
    assert b[0] < b[2] < b[3]


def test_offload_pcie_bytes():
    tr = comms.zero_traffic(8_000, 4, 3, grad_accum=4, offload_param=True, offload_optimizer=True)
    shard = 8_000 * 2 / 4
    assert tr.pcie_h2d == pytest.approx(4 * 2 * shard)
    assert tr.pcie_d2h == pytest.approx(4 * shard)


def test_step_time_overlap():
    tr = comms.zero_traffic(10**9, 2, 3)
    full = comms.step_time(tr, collective_gbytes_per_s=1.0, compute_s=1.0)
    half = comms.step_time(tr, collective_gbytes_per_s=1.0, compute_s=1.0, overlap=0.5)
    assert full.total_s == pytest.approx(1.0 + tr.collective / 1e9)
    assert half.exposed_s == pytest.approx(full.exposed_s / 2)


def test_seed_claims_hold():
    rows = comms.seed_comparison()
    checks = comms.seed_checks(rows)
    assert checks["ordering_ok"]
    assert checks["p4d_ratio_measured"] == pytest.approx(2372 / 981)
    assert abs(checks["p4d_ratio_error"]) <= 0.30
    assert all(abs(r.error) < 1e-9 for r in rows if r.fitted)  # the only fitted numbers
    assert len(SEED_RUNS) == 7 and SEED_STEPS == 50


def test_bad_input_is_a_workshop_error(capsys):
    with pytest.raises(WorkshopError, match="ZeRO stage"):
        comms.zero_traffic(10, 2, 4)
    with pytest.raises(WorkshopError, match="overlap"):
        comms.step_time(comms.zero_traffic(10, 2, 3), collective_gbytes_per_s=1, compute_s=0, overlap=1.0)
    with pytest.raises(WorkshopError, match="backend"):
        comms.run_collective_bench(backend="mpi")
    assert comms.main(["bench", "--backend", "mpi"]) == 2
    assert "error:" in capsys.readouterr().err


def test_model_cli_writes_json(tmp_path):
    out = tmp_path / "c.json"
    assert comms.main(["model", "--out", str(out)]) == 0
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
