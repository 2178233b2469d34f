"""Hardware detection and the GEMM benchmark: real values on whatever CPU runs the tests (AMX or not)."""

import json

import pytest

from workshop.cli import plan as plan_cli
from workshop.errors import WorkshopError
from workshop.plan import gemm, hardware


@pytest.fixture(scope="module")
def detected():
    return hardware.detect()


def test_detect_reports_flags_consistently_with_proc_cpuinfo(detected):
    flags = set(hardware._read_proc_cpuinfo().get("flags", "").split())
    if not flags:
        pytest.skip("no /proc/cpuinfo flags on this OS")
    assert detected["amx_bf16"] == ("amx_bf16" in flags)
    assert detected["avx512_bf16"] == ("avx512_bf16" in flags)
    assert detected["amx"] == ("amx_bf16" in flags and "amx_tile" in flags)
    assert detected["cores"] >= 1 and detected["clock_source"]
    assert isinstance(detected["torch_capability"], str) and detected["torch_capability"]


def test_onednn_line_agrees_with_amx_flag(detected):
    impl = detected["onednn_bf16_impl"]
    if impl is None:
        pytest.skip("this torch build ran no oneDNN matmul for bf16")
    # oneDNN can only pick an AMX kernel when the CPU reports AMX, and names the ISA it used.
    assert ("amx" in impl) <= detected["amx"]
    assert detected["onednn_isa"]
    assert detected["why"].startswith("AMX present" if detected["amx"] else "No AMX")


def test_peak_formula_matches_hand_computation():
    p = hardware.peak_tflops("amx_bf16", 96, 3.2)  # r7i.48xlarge: 96 cores x 3.2 GHz x 1024
    assert p.tflops == pytest.approx(96 * 3.2e9 * 1024 / 1e12)
    assert 300 < p.tflops < 320
    assert hardware.peak_tflops("avx512_fp32_intel", 2, 2.0).tflops == pytest.approx(0.256)
    with pytest.raises(WorkshopError, match="unknown matmul path"):
        hardware.peak_tflops("amx_fp64", 2, 2.0)
    with pytest.raises(WorkshopError):
        hardware.peak_tflops("amx_bf16", 0, 2.0)


def test_machine_peaks_use_the_isa_present(detected):
    peaks = hardware.machine_peaks(detected, cores=2)
    assert peaks["amx_reference"].flops_per_cycle == 1024
    if detected["clock_ghz"] and peaks["bf16"]:
        if detected["amx"]:
            assert peaks["bf16"].path == "amx_bf16"
        else:
            assert peaks["bf16"].path != "amx_bf16"
            assert peaks["bf16"].tflops < peaks["amx_reference"].tflops


def test_isa_class_for_known_cpus():
    base = {"amx": False, "avx512f": True, "avx512_bf16": True, "avx2": True, "arch": "x86_64"}
    assert hardware.isa_class({**base, "vendor": "AuthenticAMD", "cpu_family": 25}) == "zen4"
    assert hardware.isa_class({**base, "vendor": "AuthenticAMD", "cpu_family": 26}) == "zen5"
    assert hardware.isa_class({**base, "amx": True, "vendor": "GenuineIntel"}) == "intel_amx"
    assert hardware.isa_class({**base, "avx512f": False, "vendor": "ARM"}) == "avx2"
    graviton = {
        **base,
        "avx512f": False,
        "avx2": False,
        "avx512_bf16": False,
        "arch": "aarch64",
        "vendor": "ARM",
        "onednn_bf16_impl": None,
    }
    assert "Arm" in hardware.explain(graviton)


def test_explain_claims_about_onednn_only_what_was_probed():
    amx = {"amx": True, "arch": "x86_64", "vendor": "GenuineIntel"}
    unprobed = hardware.explain({**amx, "onednn_uses_amx": None, "onednn_bf16_impl": None})
    assert "AMX present" in unprobed and "did not pick" not in unprobed and "workshop hw" in unprobed
    used = hardware.explain(
        {**amx, "onednn_uses_amx": True, "onednn_bf16_impl": "brg_matmul:avx10_1_512_amx"}
    )
    assert "dispatches bf16 matmuls to it: brg_matmul:avx10_1_512_amx" in used
    assert "did not pick" in hardware.explain(
        {**amx, "onednn_uses_amx": False, "onednn_bf16_impl": "gemm:jit"}
    )
    assert hardware.detect(probe_onednn=False)["onednn_uses_amx"] is None


def test_gemm_benchmark_measures_real_throughput():
    res = gemm.gemm_benchmark(sizes=(128, 256), threads=(1,), warmup=1, repeats=3, min_seconds=0.01)
    assert {(r.size, r.dtype) for r in res} == {(128, "bf16"), (256, "bf16"), (128, "fp32"), (256, "fp32")}
    for r in res:
        assert len(r.tflops) == 3
        assert r.worst <= r.median <= r.best
        assert 1e-4 < r.median < 100  # a real CPU: more than 0.1 GFLOPS, less than 100 TFLOPS
    d = {"cores": 1, "clock_ghz": 2.0, "isa_class": "zen4", "amx": False, "avx512_bf16": True, "why": "x"}
    s = gemm.summarize(d, res)
    assert s["bf16_over_fp32"] == pytest.approx(s["bf16_tflops"] / s["fp32_tflops"], rel=0.01)
    amx_peak_one_core = 1 * 2.0 * 1024 / 1000  # at this machine's own clock: one clock per machine
    assert s["peak_amx_bf16_tflops"] == pytest.approx(amx_peak_one_core)
    assert s["bf16_pct_of_amx_peak"] == pytest.approx(100 * s["bf16_tflops"] / amx_peak_one_core, abs=0.1)
    assert s["peak_bf16_tflops"] == pytest.approx(1 * 2.0 * 64 / 1000)  # Zen 4 bf16: 64 FLOP/cycle


def test_summary_compares_bf16_and_fp32_at_the_same_thread_count():
    """The Zen 4 run of issue #28: bf16 best at 1 thread (0.219), fp32 best at 2 (0.189). Quoting those two
    gave x1.16; at equal threads the ratios are x2.24 (1 thread) and x1.11 (2 threads)."""

    def cell(dtype, threads, tflops):
        return gemm.GemmResult(1024, dtype, threads, [tflops])

    res = [cell("bf16", 1, 0.219), cell("fp32", 1, 0.0978), cell("bf16", 2, 0.210), cell("fp32", 2, 0.189)]
    d = {"cores": 2, "clock_ghz": 2.6, "isa_class": "zen4", "amx": False, "avx512_bf16": True, "why": "x"}
    s = gemm.summarize(d, res)
    assert s["threads"] == 1 and s["bf16_tflops"] == 0.219 and s["fp32_tflops"] == 0.0978
    assert s["bf16_over_fp32"] == 2.24 and s["bf16_over_fp32_by_threads"] == {1: 2.24, 2: 1.11}
    # each figure panel gets the peaks of its own thread count: two cores peak twice one core
    one, two = s["peaks_by_threads"][1], s["peaks_by_threads"][2]
    assert two["bf16 peak here"] == pytest.approx(2 * one["bf16 peak here"])
    assert s["peak_bf16_tflops"] == one["bf16 peak here"]


def test_gemm_benchmark_rejects_bad_input():
    with pytest.raises(WorkshopError, match="dtype"):
        gemm.gemm_benchmark(sizes=(64,), dtypes=("int4",))
    with pytest.raises(WorkshopError):
        gemm.gemm_benchmark(sizes=(0,))


def test_cli_json(capsys):
    assert plan_cli.hw(["--json", "--sizes", "128", "--threads", "1", "--repeats", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("amx", "bf16_tflops", "fp32_tflops", "peak_bf16_tflops", "peak_amx_bf16_tflops"):
        assert key in out
    assert out["bf16_tflops"] > 0 and out["fp32_tflops"] > 0
