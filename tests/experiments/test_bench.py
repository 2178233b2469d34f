"""workshop.experiments.bench: the statistics, interleaving and MFU math, the verdicts, and one tiny real
interleaved run."""

import json
import sys

import pytest

from workshop import paths
from workshop.cli.bench import bench as bench_command
from workshop.errors import WorkshopError
from workshop.experiments import measure
from workshop.experiments.bench import ipex, summary, training
from workshop.experiments.bench.config import BenchConfig
from workshop.experiments.measure import Stats
from workshop.experiments.recipes import VARIANTS, Variant
from workshop.plan import models


def test_stats_median_spread_and_empty():
    s = Stats.of([10.0, 12.0, 8.0, None])
    assert (s.n, s.median, s.min, s.max) == (3, 10.0, 8.0, 12.0)
    assert s.spread_pct == 40.0
    with pytest.raises(WorkshopError, match="no measurements"):
        Stats.of([None])


def test_paired_ratios_cancel_drift_between_rounds():
    # the machine gets 20% slower in round 2; each back-to-back pair still shows B is 2x faster
    a = [100.0, 80.0]
    b = [200.0, 160.0]
    r = measure.paired_ratios(b, a)
    assert r.values == [2.0, 2.0] and r.spread_pct == 0.0
    with pytest.raises(WorkshopError, match="as many"):
        measure.paired_ratios([1.0], [1.0, 2.0])


def test_interleave_order_is_abab():
    assert measure.interleave(["a", "b"], 3) == [(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a"), (2, "b")]
    with pytest.raises(WorkshopError):
        measure.interleave(["a", "a"], 2)
    with pytest.raises(WorkshopError, match="rounds"):
        measure.interleave(["a"], 0)


def test_flops_per_token_and_mfu():
    # 6N without the input embedding (a lookup) + 12 * L * d * T for attention
    fpt = models.flops_per_token(1_000_000, layers=2, hidden=64, seq_len=128, vocab=1000)
    assert fpt == 6 * (1_000_000 - 64_000) + 12 * 2 * 64 * 128
    assert (
        models.flops_per_token(1_000_000, layers=2, hidden=64, seq_len=128, vocab=1000, tied=True)
        == 6 * 1_000_000 + 12 * 2 * 64 * 128
    )
    # 1e12 FLOP/s of a 2 TFLOPS peak is 50%
    assert measure.mfu(1e6, 1e6, 2.0) == pytest.approx(50.0)
    with pytest.raises(WorkshopError):
        measure.mfu(1.0, 1.0, 0)


def test_peaks_never_assume_amx():
    p = measure.peaks_for(2)
    assert p["amx_bf16_tflops"] > 0 and p["cores"] <= 2
    if not p["amx"]:
        assert p["bf16_path"] != "amx_bf16"


def test_corpus_stats_counts_padding_waste(tmp_path):
    class Tok:  # one token per word
        def __call__(self, texts):
            return {"input_ids": [t.split() for t in texts]}

    f = tmp_path / "c.txt"
    f.write_text("short\n" + "w " * 10 + "\n" + "w " * 1000 + "\n")
    s = training.corpus_stats(f, Tok(), min_chars=11, max_length=100)
    assert (
        s["lines"] == 3 and s["kept_lines"] == 2
    )  # "short" (5 chars) is dropped, like the original workshop
    assert s["mean_tokens_per_line"] == (10 + 100) / 2  # the long line is truncated at max_length
    assert s["padding_efficiency"] == pytest.approx(0.55)


def test_original_variant_matches_the_original_recipe():
    from workshop.train import parse_args

    v = VARIANTS["original"]
    args = parse_args(training.variant_argv(v, BenchConfig(dataset=__file__), paths.REPO / "out" / "x"))
    assert (args.zero_stage, args.offload_param, args.offload_optimizer) == (3, True, True)
    assert (args.micro_batch, args.grad_accum, args.seq_len, args.packing) == (1, 4, 512, False)
    assert args.min_chars == 11 and args.precision == "bf16" and args.extra_ds["overlap_comm"] is True
    w = parse_args(
        training.variant_argv(VARIANTS["workbook"], BenchConfig(dataset=__file__), paths.REPO / "x")
    )
    assert w.packing and w.precision == "bf16" and not w.offload_param
    assert w.engine == "ddp" and w.master_weights  # bf16 weights with fp32 masters, not autocast
    f = parse_args(
        training.variant_argv(VARIANTS["workbook_fp32"], BenchConfig(dataset=__file__), paths.REPO / "x")
    )
    assert f.precision == "fp32" and not f.master_weights
    assert VARIANTS["workbook_fp32"].precision == "fp32"
    assert w.compile and w.attn_implementation == "eager" and w.optimizer == "adamw_torch_fused"
    assert w.allreduce == "auto" and {VARIANTS[n].allocator for n in ("workbook", "workbook_fp32")} == {
        "auto"
    }
    assert (
        VARIANTS["original"].allocator == "system" and not args.compile
    )  # the original workshop's recipe as it was


def test_without_a_compiler_the_workbook_recipe_runs_eager(monkeypatch):
    """Inductor builds CPU kernels with a C++ compiler: where none is found the recipe drops compile (and the
    attention that only pays compiled) instead of failing at its first step."""
    from workshop.plan import hardware
    from workshop.train import parse_args

    monkeypatch.setattr(hardware, "has_cxx_compiler", lambda: False)
    w = parse_args(
        training.variant_argv(VARIANTS["workbook"], BenchConfig(dataset=__file__), paths.REPO / "x")
    )
    assert not w.compile and w.attn_implementation == "sdpa" and w.master_weights
    assert "--compile" in VARIANTS["workbook"].argv  # the definition itself is untouched


def fake_runner(speed: dict[str, float]):
    calls = []

    def run(v: Variant, cfg: BenchConfig, round_: int) -> dict:
        calls.append((round_, v.name))
        drift = 1.0 - 0.1 * round_
        tps = speed[v.name] * drift
        m = {
            "steps": [{"tokens": 1}] * cfg.steps,
            "tokens_per_s_median": tps,
            "step_time_s_median": 1000 / tps,
            "world_size": 2,
            "params": 60_000_000,
            "args": {"micro_batch": 1, "grad_accum": 4, "seq_len": 512},
        }
        return training.run_record(v, round_, m, 1.0)

    return run, calls


def test_training_benchmarks_interleave_once_and_split(tmp_path, kit_cache):
    run, calls = fake_runner(
        {"original": 40.0, "original_engine_packed": 300.0, "workbook": 1000.0, "workbook_fp32": 400.0}
    )
    cfg = BenchConfig(steps=4, rounds=2, cache_dir=str(kit_cache), out_dir=str(tmp_path / "runs"))
    out = training.training_benchmarks(["recipes", "engine"], cfg, runner=run, echo=lambda *_: None)
    # the shared "workbook" variant ran once per round, not once per benchmark
    assert calls == [
        (0, "workbook"),
        (0, "original"),
        (0, "original_engine_packed"),
        (1, "workbook"),
        (1, "original"),
        (1, "original_engine_packed"),
    ]
    rec = out["recipes"]
    assert rec["tokens_per_s_ratio"]["median"] == pytest.approx(25.0)
    assert rec["tokens_per_s_ratio"]["spread_pct"] == pytest.approx(0.0)  # drift cancels within a round
    assert out["engine"]["tokens_per_s_ratio"]["median"] == pytest.approx(1000 / 300)
    w = rec["variants"]["workbook"]
    assert w["tokens_per_s"]["values"] == [1000.0, 900.0]
    assert w["mfu_pct_of_amx_peak"] == pytest.approx(
        100 * 950 * w["flops_per_token"] / (rec["peaks"]["amx_bf16_tflops"] * 1e12), rel=1e-3
    )
    assert rec["corpus"]["mean_tokens_per_line"] > 10  # paragraph-level lines, not one short line each


def test_summary_rows_verdicts(tmp_path, kit_cache):
    run, _ = fake_runner(
        {"original": 100.0, "original_engine_packed": 300.0, "workbook": 1000.0, "workbook_fp32": 400.0}
    )
    cfg = BenchConfig(steps=4, rounds=1, cache_dir=str(kit_cache), out_dir=str(tmp_path / "runs"))
    res = training.training_benchmarks(
        ["recipes", "engine", "precision"], cfg, runner=run, echo=lambda *_: None
    )
    res["workbook"] = {"total_s": 720.0, "notebooks": [{"notebook": "01_x.ipynb"}]}
    for name, r in res.items():
        measure.save(name, r, tmp_path)
    rows = {r["benchmark"]: r for r in summary.summary_rows(results_dir=tmp_path)}
    assert rows["recipes"]["value"] == 10.0 and rows["recipes"]["verdict"] == "missed by 50%"  # target: 20x
    assert rows["engine"]["verdict"] == "met"
    assert rows["precision"]["value"] == 2.5 and rows["precision"]["verdict"] == "met"
    assert rows["workbook"]["value"] == 12.0 and rows["workbook"]["verdict"] == "missed by 20%"
    assert rows["gemm"]["verdict"] == "not measured"
    if not res["recipes"]["peaks"]["amx"]:
        assert rows["mfu"]["verdict"].startswith("cannot be judged")
    assert "| recipes |" in summary.format_rows(list(rows.values()))
    png = summary.plot(res, tmp_path / "img")
    assert png and png[0].stat().st_size > 1000


def test_cli_rejects_bad_input(capsys):
    assert bench_command(["recipes", "--steps", "2"]) == 2
    assert "steps must be >= 3" in capsys.readouterr().err
    assert bench_command(["recipes", "--dataset", "/no/such/file"]) == 2
    assert "--dataset '/no/such/file': no such file" in capsys.readouterr().err


def test_ipex_skips_plainly_without_its_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKSHOP_IPEX_PYTHON", str(tmp_path / "missing" / "python"))
    r = ipex.ipex(BenchConfig())
    assert r["status"] == "skipped" and "environment-ipex.yml" in r["message"]


@pytest.mark.slow
def test_ipex_child_plumbing_with_stock_arms(tmp_path, kit_cache):
    """The child script end to end in THIS environment, both arms stock: the JSON contract holds."""
    cfg = BenchConfig(
        model="tiny", steps=3, rounds=2, seq_len=64, cache_dir=str(kit_cache), out_dir=str(tmp_path)
    )
    r = ipex.ipex(cfg, sys.executable, stock_only=True)
    assert r["status"] == "ok", r
    assert len(r["stock_tokens_per_s"]) == 2 and all(x > 0 for x in r["ipex_tokens_per_s"])
    assert r["stock_only"] is True and 0.2 < r["ratio"]["median"] < 5


@pytest.mark.slow
def test_real_interleaved_recipes_tiny(tmp_path, kit_cache):
    """Two real 2-rank runs per variant (tiny model, few steps): the JSON has every run, in ABAB order."""
    cfg = BenchConfig(
        model="tiny",
        steps=3,
        rounds=1,
        seq_len=128,
        cache_dir=str(kit_cache),
        out_dir=str(tmp_path / "runs"),
        results_dir=str(tmp_path / "res"),
    )
    out = training.training_benchmarks(["recipes"], cfg, echo=lambda *_: None)
    r = out["recipes"]
    assert r["order"] == ["workbook#0", "original#0"]
    for name in ("workbook", "original"):
        v = r["variants"][name]
        assert v["tokens_per_s"]["median"] > 0 and v["runs"][0]["steps"] == 3
    # padding wastes most of the original recipe's compute; packing wastes none
    assert (
        r["variants"]["original"]["computed_tokens_per_s"]
        > 2 * r["variants"]["original"]["tokens_per_s"]["median"]
    )
    path = measure.save("recipes", r, cfg.results_dir)
    assert json.loads(path.read_text())["variants"]["original"]["argv"][:2] == ["--zero-stage", "3"]


def test_stored_rows_quote_one_amx_peak_and_name_their_machine():
    """Issue 49: the stored table quoted two AMX peaks (5.32 and 6.55 TFLOPS) for one 2-core Xeon, and showed
    rows measured on "a machine not recorded" (the workbook's 4.17 min): one peak at the measured clock, and
    a row without its machine is left out of the learner's table (kept in the maintainers')."""
    peaks = {
        "cpu_model": "Xeon",
        "amx": True,
        "cores": 2,
        "clock_ghz": 2.6,
        "bf16_path": "amx_bf16",
        "bf16_tflops": 5.3248,
        "amx_bf16_tflops": 6.5536,
    }
    rec = {
        "a": "w",
        "peaks": peaks,
        "measured_at": "2026-11-25 05:00:00",
        "variants": {
            "w": {"model_tflops": 0.934, "mfu_pct_of_present_peak": 17.54, "mfu_pct_of_amx_peak": 14.25}
        },
    }
    mfu = summary._mfu_row({"recipes": rec})
    assert mfu["value"] == 17.54 and "5.32 TFLOPS" in mfu["detail"] and "6.55" not in mfu["detail"]
    gemm = {
        "amx": True,
        "peak_bf16_path": "amx_bf16",
        "bf16_pct_of_peak": 44.1,
        "bf16_pct_of_amx_peak": 35.8,
        "bf16_tflops": 2.348,
        "bf16_size": 2048,
        "bf16_over_fp32": 5.35,
        "clock_ghz": 2.6,
        "detect": {"cpu_model": "Xeon"},
        "measured_at": "2026-11-25 05:28:55",
    }
    res = {
        "gemm": gemm,
        "workbook": {
            "total_s": 250.5,
            "notebooks": [{"notebook": "01_x.ipynb"}],
            "measured_at": "2026-11-22 01:59:06",
        },
    }
    rows = summary.summary_rows(res)
    assert next(r for r in rows if r["benchmark"] == "gemm")["value"] == 44.1
    learner = summary.format_rows(rows)
    assert "| gemm |" in learner and "Xeon" in learner
    assert "| workbook |" not in learner and "not recorded" not in learner
    assert "| workbook |" in summary.format_rows(rows, targets=True)
