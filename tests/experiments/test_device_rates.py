"""benchmarks/device_rates.py: its derived numbers follow from its raw ones, and its dry run exercises every
path the one device call takes (so that call cannot fail on a typo)."""

import importlib.util
import json
import subprocess
import sys

import pytest

from workshop.paths import REPO, RESULTS_DIR

SCRIPT = REPO / "benchmarks" / "device_rates.py"
RESULT = RESULTS_DIR / "device-amx16-h100-2026-11-26.json"


@pytest.fixture(scope="module")
def device_rates():
    spec = importlib.util.spec_from_file_location("device_rates", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_derived_thread_scaling_and_mfu_follow_from_the_raw_runs(device_rates):
    res = json.loads(RESULT.read_text())
    runs = {(r["threads"], r["micro_batch"]): r["tokens_per_s"] for r in res["cpu"]["train"]}
    got = device_rates.derive(res)
    for (t, mb), tps in runs.items():
        assert got["thread_scaling"][f"mb{mb}_x{t}"] == pytest.approx(tps / (t * runs[(1, mb)]))
    two = {r["threads"]: r["tokens_per_s"] for r in res["cpu"]["train_ddp"]}
    assert got["thread_scaling"]["ddp2x8_mb4_vs_same_ranks_x1"] == pytest.approx(two[8] / (8 * two[1]))
    for r in res["gpu"]["train"]:
        key = f"{r['name']}_{r['attn']}_mb{r['micro_batch']}"
        assert got["gpu"][key]["mfu_6N"] == pytest.approx(6 * r["params"] * r["tokens_per_s"] / 989.4e12)
    assert got == res["derived"]  # the committed file was written by this code


def test_versus_planner_reads_the_planner_rates_of_today(device_rates):
    from workshop.plan import calibration, rates

    res = json.loads(RESULT.read_text())
    vs = device_rates.versus_planner(res)
    assert vs["cpu_thread_scaling"]["assumed"] == calibration.cpu_thread_scaling()[0].value
    assert "mb4_x1" not in vs["cpu_thread_scaling"]["assumed_over_measured"]  # 1 thread against itself
    assert vs["gpu_mfu"]["planner"]["hf-deepspeed-bf16"] == rates.GPU_MFU.value


@pytest.mark.slow
def test_dry_run_measures_every_part_without_an_error(tmp_path):
    argv = [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)]
    subprocess.run(argv, check=True, timeout=600)
    res = json.loads((tmp_path / "device_rates.json").read_text())
    assert not [k for k in res if k.endswith("_error")]
    runs = res["cpu"]["train"] + res["cpu"]["train_ddp"] + res["gpu"]["train"]
    assert runs and all(r.get("tokens_per_s", 0) > 0 for r in runs), [r.get("error") for r in runs]
    assert {g["dtype"] for g in res["cpu"]["gemm"]} == {"bf16", "fp32"}
    assert set(res["derived"]["thread_scaling"]) >= {"mb2_x1", "mb2_x2", "ddp2x1_mb2_vs_1x1"}
