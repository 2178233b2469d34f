"""workshop.experiments.ceiling: the model's GEMM shapes and FLOPs, the lever -> TrainArgs/env mapping, the
JSON and its table rows, the GPU path's configuration, bad input, and one tiny real `bench ceiling` run."""

import json
import subprocess
import sys

import pytest

from workshop.cli.bench import bench as bench_command
from workshop.errors import WorkshopError
from workshop.experiments import measure
from workshop.experiments.bench import summary as bench_summary
from workshop.experiments.ceiling import config, levers, machine, probe, result, rounds
from workshop.experiments.ceiling import shapes as ceiling_shapes
from workshop.experiments.ceiling import table as ceiling_table
from workshop.experiments.ceiling.config import CeilingConfig
from workshop.experiments.ceiling.levers import LEVERS
from workshop.experiments.ceiling.shapes import Linear
from workshop.paths import RESULTS_DIR
from workshop.plan.models import architecture, build_config
from workshop.train import TrainArgs, parse_args
from workshop.train.affinity import rank_cores

FAKE_CPU = {
    "cpu_model": "Test CPU",
    "vendor": "AuthenticAMD",
    "arch": "x86_64",
    "cores": 2,
    "isa_class": "avx2",
    "isa_flags": {"amx": False, "avx512f": False, "avx512_bf16": False, "avx2": True},
    "native_bf16": False,
    "native_bf16_why": "no native bf16",
    "versions": {"torch": "x"},
    "date": "d",
}


def test_linear_shapes_of_tiny_are_every_matmul_weight():
    cfg = build_config("tiny")
    shapes = {s.name: s for s in ceiling_shapes.linear_shapes(cfg)}
    # 8 heads of 32, 4 KV heads (GQA): k and v project 256 -> 128
    assert (shapes["q_proj"].inp, shapes["q_proj"].out) == (256, 256)
    assert (shapes["k_proj"].out, shapes["v_proj"].out) == (128, 128)
    assert (shapes["gate_proj"].out, shapes["down_proj"].inp) == (688, 688)
    assert shapes["lm_head"].out == 8192 and shapes["lm_head"].count == 1 and shapes["q_proj"].count == 4
    # every parameter is a GEMM weight except the input embedding (a lookup) and the RMSNorm weights
    matmul = sum(s.inp * s.out * s.count for s in shapes.values())
    norms = (2 * cfg.num_hidden_layers + 1) * cfg.hidden_size
    assert matmul == architecture("tiny").params - cfg.vocab_size * cfg.hidden_size - norms == 4_997_120
    # q and o share one timed shape
    assert ceiling_shapes.distinct_shapes(list(shapes.values()))[(256, 256)] == ["q_proj", "o_proj"]


def test_linear_shapes_follow_head_dim_and_gqa_of_llama_32_1b():
    shapes = {s.name: s for s in ceiling_shapes.linear_shapes(build_config("llama-3.2-1b"))}
    assert (shapes["q_proj"].out, shapes["k_proj"].out, shapes["o_proj"].inp) == (2048, 512, 2048)
    assert (shapes["up_proj"].out, shapes["lm_head"].out, shapes["down_proj"].count) == (8192, 128256, 16)


def test_flop_accounting_for_a_known_config():
    g = Linear("gate_proj", 256, 688, 4)
    assert (
        g.train_flops(1024) == 6 * 1024 * 256 * 688 * 4
    )  # forward, input grad, weight grad: 2*T*in*out each
    arch = architecture("tiny")
    assert (arch.params, arch.layers, arch.hidden, arch.vocab, arch.tied_embeddings) == (
        7_096_576,
        4,
        256,
        8192,
        False,
    )
    rec = result.record(
        {"tokens_per_s_median": 1000.0, "step_time_s_median": 1.0, "params": 7_096_576},
        TrainArgs(seq_len=256),
        arch,
    )
    assert rec["flops_per_token"] == 6 * (7_096_576 - 8192 * 256) + 12 * 4 * 256 * 256
    assert rec["model_tflops"] == pytest.approx(1000 * rec["flops_per_token"] / 1e12)


def test_ceiling_adds_the_ranks_that_run_at_once():
    shapes = [Linear("a", 10, 20, 2), Linear("b", 20, 10, 1)]
    one = {
        "shapes": [
            {"inp": 10, "out": 20, "fwd_s": 1e-3, "dx_s": 1e-3, "dw_s": 2e-3},
            {"inp": 20, "out": 10, "fwd_s": 1e-3, "dx_s": 1e-3, "dw_s": 1e-3},
        ]
    }
    c = probe.ceiling_from_children([one, one], shapes, tokens=100)
    flops = 6 * 100 * 200 * 3  # 3 weights of 200 elements
    per_rank = flops / (2 * 4e-3 + 1 * 3e-3)
    assert c["tflops"] == pytest.approx(2 * per_rank / 1e12)
    assert c["per_shape"][0]["tflops"] == pytest.approx(2 * 6 * 100 * 200 / 4e-3 / 1e12)


def recipe_cfg(kit_cache, tmp_path, **kw):
    return CeilingConfig(cache_dir=str(kit_cache), out_dir=str(tmp_path / "runs"), **kw)


def test_levers_map_to_train_args_and_env(kit_cache, tmp_path, monkeypatch):
    from workshop.launch import allocator as launch
    from workshop.plan import hardware

    monkeypatch.setattr(launch, "allocator_path", lambda name: f"/usr/lib/lib{name}.so")
    monkeypatch.setattr(hardware, "has_cxx_compiler", lambda: True)
    recipe = config.recipe_args(recipe_cfg(kit_cache, tmp_path))
    assert (recipe.engine, recipe.optimizer, recipe.micro_batch, recipe.threads) == (
        "ddp",
        "adamw_torch_fused",
        4,
        1,
    )
    assert (
        recipe.precision == "auto"
        and recipe.backend == "gloo"
        and recipe.packing
        and recipe.allreduce == "auto"
    )
    assert recipe.compile and recipe.attn_implementation == "eager" and recipe.master_weights

    def args(name):
        a = levers.lever_args(LEVERS[name], recipe)
        assert parse_args(a.to_argv()) == a  # what torchrun passes is exactly this lever
        return a

    assert (args("no_compile").compile, args("no_compile").attn_implementation) == (False, "sdpa")
    assert (args("sdpa_attention").compile, args("sdpa_attention").attn_implementation) == (True, "sdpa")
    assert args("adamw_unfused").optimizer == "adamw_torch"
    assert args("gloo_allreduce").allreduce == "backend" and "--allreduce" in args("gloo_allreduce").to_argv()
    z = args("ds_cpu_adam")
    assert (z.engine, z.zero_stage, z.offload_optimizer, z.compile) == ("deepspeed", 3, True, False)
    assert (
        LEVERS["ds_cpu_adam"].base == "zero3" and LEVERS["zero3"].base == "no_compile"
    )  # uncompiled vs uncompiled
    p = args("zero3_persist")
    assert p.extra_ds == {
        "stage3_param_persistence_threshold": 10_000_000,
        "stage3_prefetch_bucket_size": 50_000_000,
    }
    assert "--extra-ds" in p.to_argv()
    assert args("affinity").pin_cores and "--pin-cores" in args("affinity").to_argv()
    env, allocator = levers.lever_env(LEVERS["affinity"])
    assert allocator == "tcmalloc" and env["LD_PRELOAD"].startswith("/usr/lib/libtcmalloc.so")  # the recipe's
    assert "OMP_PROC_BIND" not in env  # set in the rank, not in torchrun
    assert args("micro_batch_x2").micro_batch == 8
    assert (args("grad_accum_x2").micro_batch, args("grad_accum_x2").grad_accum) == (2, 2)
    assert (args("seq_len_x2").seq_len, args("seq_len_x2").micro_batch) == (
        512,
        2,
    )  # the same tokens per forward
    assert args("ddp_bucket_x4").ddp_bucket_mb == 100 and "--ddp-bucket-mb" in args("ddp_bucket_x4").to_argv()
    ac = args("autocast")
    assert (
        not ac.master_weights
        and "--master-weights" not in ac.to_argv()
        and LEVERS["autocast"].needs == ("recipe_bf16",)
    )
    assert args("fp32").master_weights is False  # fp32 weights and bf16 master weights exclude each other
    assert levers.lever_env(LEVERS["system_malloc"]) == ({}, "system")
    env, allocator = levers.lever_env(LEVERS["jemalloc"])
    assert allocator == "jemalloc" and "background_thread:true" in env["MALLOC_CONF"]
    assert levers.lever_env(LEVERS["recipe"], "cuda") == (
        {},
        None,
    )  # GPU ranks: the host's malloc is not the limit


def test_bases_are_added_and_requirements_skip_with_a_reason(kit_cache, tmp_path, monkeypatch):
    from workshop.launch import allocator as launch

    assert levers.parse_levers("ds_cpu_adam") == ["recipe", "no_compile", "zero3", "ds_cpu_adam"]
    monkeypatch.setattr(launch, "allocator_path", lambda name: None)
    pl = config.plan(
        recipe_cfg(kit_cache, tmp_path, levers=("jemalloc", "system_malloc", "fp32", "no_compile"))
    )
    assert "apt-get install libjemalloc2" in pl.skipped["jemalloc"]
    assert "already runs glibc malloc here: tcmalloc is not installed" in pl.skipped["system_malloc"]
    assert pl.runs["recipe"][2] == "system"  # the recipe runs on, with what there is
    if pl.precision == "fp32":  # a CPU without native bf16: the recipe already runs fp32
        assert "already runs fp32" in pl.skipped["fp32"]
    assert set(pl.runs) >= {"recipe"}


@pytest.mark.parametrize("native", [False, True], ids=["emulated-bf16", "native-bf16"])
def test_autocast_lever_runs_only_where_the_recipe_is_bf16(kit_cache, tmp_path, monkeypatch, native):
    """The autocast lever compares against the recipe's bf16 weights: where `auto` resolves to fp32 it is
    skipped with the reason. Without a C++ compiler the recipe runs uncompiled, and the compile levers say why
    not."""
    from workshop.plan import hardware

    monkeypatch.setattr(hardware, "native_bf16", lambda: (native, "faked"))
    monkeypatch.setattr(hardware, "resolve_precision", lambda p: ("bf16" if native else "fp32", "faked"))
    monkeypatch.setattr(hardware, "has_cxx_compiler", lambda: False)
    pl = config.plan(recipe_cfg(kit_cache, tmp_path, levers=("autocast", "no_compile", "sdpa_attention")))
    assert pl.skipped["no_compile"] == pl.skipped["sdpa_attention"] == levers.NO_COMPILER
    assert not pl.recipe.compile and pl.recipe.attn_implementation == "sdpa"
    if native:
        assert pl.precision == "bf16" and not pl.runs["autocast"][0].master_weights
    else:
        assert pl.skipped["autocast"] == "the recipe already runs fp32 here (precision auto)"


def test_unknown_lever_names_it_and_the_allowed_ones(kit_cache, tmp_path, capsys):
    with pytest.raises(
        WorkshopError, match=r"unknown lever 'warp_drive'; allowed: recipe, no_compile, sdpa_attention"
    ):
        levers.parse_levers("no_compile,warp_drive")
    with pytest.raises(WorkshopError, match="unknown device 'tpu'; allowed: cpu, cuda"):
        recipe_cfg(kit_cache, tmp_path, device="tpu").validate()
    assert bench_command(["ceiling", "--steps", "2"]) == 2
    assert "steps must be >= 3" in capsys.readouterr().err
    assert bench_command(["recipes", "ceiling"]) == 2
    assert "on its own" in capsys.readouterr().err
    with pytest.raises(WorkshopError, match="unknown attn-implementation 'flash'; allowed: sdpa, eager"):
        TrainArgs(attn_implementation="flash").validate()


def test_rank_cores_give_each_rank_its_own_block():
    assert rank_cores(0, 2, 1, [0, 1]) == [0] and rank_cores(1, 2, 1, [0, 1]) == [1]
    assert rank_cores(1, 2, None, [4, 5, 6, 7]) == [6, 7]
    with pytest.raises(WorkshopError, match="needs 4 cores"):
        rank_cores(0, 2, 2, [0, 1])


def fake_prober(rate_gflops: dict):
    def probe(shapes, *, tokens, dtype, nproc, threads, device="cpu", min_seconds=0.25):
        return {
            "tflops": rate_gflops[dtype] / 1e3,
            "tokens": tokens,
            "dtype": dtype,
            "device": device,
            "threads": threads,
            "nproc": nproc,
            "per_shape": [],
        }

    return probe


def fake_trainer(speed: dict, calls: list):
    def train(args, env, cfg, round_):
        name = args.output_dir.rsplit("/", 1)[-1]
        calls.append((round_, name, env))
        tps = speed.get(name, 1000.0) * (1 - 0.1 * round_)  # the machine drifts; paired ratios must not
        return {"tokens_per_s_median": tps, "step_time_s_median": 1.0, "params": 7_096_576, "steps": [{}] * 4}

    return train


@pytest.mark.parametrize("native", [False, True], ids=["emulated-bf16", "native-bf16"])
def test_json_schema_rows_and_summary(kit_cache, tmp_path, monkeypatch, native):
    """The faked machine decides precision auto as well (an AMX or Zen 4 CI runner must not change the
    test)."""
    from workshop.plan import hardware

    cpu = {**FAKE_CPU, "native_bf16": native, "isa_flags": {**FAKE_CPU["isa_flags"], "avx512_bf16": native}}
    monkeypatch.setattr(rounds, "machine", lambda device: dict(cpu))
    monkeypatch.setattr(hardware, "native_bf16", lambda: (native, "faked"))
    from workshop.launch import allocator as launch

    monkeypatch.setattr(launch, "allocator_path", lambda name: f"/usr/lib/lib{name}.so")
    calls: list = []
    cfg = recipe_cfg(kit_cache, tmp_path, levers=("sdpa_attention", "affinity", "bf16"), rounds=2)
    res = rounds.run(
        cfg,
        trainer=fake_trainer({"recipe": 1000.0, "sdpa_attention": 800.0}, calls),
        prober=fake_prober({"fp32": 100.0, "bf16": 2.0}),
        echo=lambda *_: None,
    )
    # interleaved: every lever once per round, the ceiling measured in the same round
    assert [(r, n) for r, n, _ in calls] == [
        (0, "recipe"),
        (0, "sdpa_attention"),
        (0, "affinity"),
        (1, "recipe"),
        (1, "sdpa_attention"),
        (1, "affinity"),
    ]
    assert all(env["LD_PRELOAD"].startswith("/usr/lib/libtcmalloc.so") for _, _, env in calls)
    assert res["precision"] == "bf16" or res["order"][0] == "ceiling:1024xfp32:start#0"
    assert res["precision"] == "bf16" or res["order"][4] == "ceiling:1024xfp32:end#0"
    assert res["precision"] == "bf16" or res["ceilings"]["1024xfp32"][0]["drift_pct"] == 0
    assert res["precision"] == ("bf16" if native else "fp32")
    lv = res["levers"]
    if res["precision"] == "fp32":
        assert lv["bf16"]["status"] == "skipped" and "x0.02 of fp32" in lv["bf16"]["reason"]
        assert res["bf16_probe"]["bf16_over_fp32"] == pytest.approx(0.02)
        assert res["isa_path"] == "AVX2-fp32"
    else:
        assert res["ceilings"]["1024xbf16"][0]["drift_pct"] == 0 and res["bf16_probe"] is None
        assert lv["bf16"]["status"] == "skipped" and "already runs bf16" in lv["bf16"]["reason"]
        assert "BF16" in res["isa_path"]
    e = lv["sdpa_attention"]
    assert e["effect_vs_base"]["median"] == pytest.approx(0.8) and e["effect_vs_base"]["spread_pct"] == 0
    assert e["verdict"] == "costs" and "--attn-implementation" not in e["train_args"]  # sdpa: the default
    assert e["allocator"] == "tcmalloc"
    fpt = lv["recipe"]["runs"][0]["flops_per_token"]
    ceil = 100.0 if res["precision"] == "fp32" else 2.0
    assert lv["recipe"]["pct_of_ceiling"]["values"][0] == pytest.approx(100 * 1000 * fpt / (ceil * 1e9))
    t = res["targets"]
    assert (
        t["step_pct_of_ceiling"]["best_lever"] in ("recipe", "affinity")
        and t["step_pct_of_ceiling"]["target"] == 60
    )
    path = measure.save("ceiling", res, tmp_path)
    saved = json.loads(path.read_text())
    assert saved["versions"]["torch"] and saved["machine"]["cpu_model"] == "Test CPU"
    rows = {r["lever"]: r for r in ceiling_table.rows(saved)}
    assert rows["sdpa_attention"]["effect"] == pytest.approx(0.8) and rows["recipe"]["verdict"] == "baseline"
    assert (
        rows["recipe"]["pct_range"][0] <= rows["recipe"]["pct_of_ceiling"] <= rows["recipe"]["pct_range"][1]
    )
    table = ceiling_table.format_table(list(rows.values()))
    assert "| SDPA attention |" in table and "skipped" in table
    summary = {r["benchmark"]: r for r in bench_summary.summary_rows(results_dir=tmp_path)}
    assert summary["ceiling"]["target"] == 60.0 and summary["ceiling"]["value"] is not None
    assert ceiling_table.figure(saved, tmp_path / "c.png").stat().st_size > 1000
    from workshop.report import interpret

    said = interpret.ceiling(saved)  # chapter 04's headline, computed from the result
    sh = interpret.ceiling_share(saved)
    pct = sh.pct
    assert sh.low <= saved["levers"]["recipe"]["pct_of_ceiling"]["median"] <= sh.high
    assert said[0].startswith("Test CPU") and "1024 rows" in said[0]
    # a share is quoted as one number only up to 100 %; above it, only its range (issue 49)
    above = f"{sh.low:.0f}-{sh.high:.0f}% of the" in said[0] and "a range that reaches above it" in said[0]
    assert (f"{pct:.0f}% (" in said[0]) if pct <= 100 else above
    # the fake machine drifts 10% between rounds but the pairs cancel it: a clear verdict, with its range
    assert (
        "  SDPA attention: " in said[1]
        and "workbook recipe beats SDPA attention by x1.25 (1.25-1.25)" in said[1]
    )
    assert any(line.startswith("  bf16: skipped") for line in said)
    # the faked rates put the step far over its ceiling: the sentence blames the probe, never "the other -N%"
    assert ("measured low" in said[0]) if pct > 100 else (f"The other {100 - pct:.0f}%" in said[-1])


def test_gpu_path_builds_nccl_ranks_and_the_gpu_peak(kit_cache, tmp_path, monkeypatch):
    """--device cuda cannot run here: what it would launch is checked instead."""
    cfg = recipe_cfg(kit_cache, tmp_path, device="cuda", nproc=4, threads=None)
    pl = config.plan(cfg)
    assert pl.recipe.backend == "nccl" and pl.recipe.threads is None and pl.precision == "bf16"
    assert {"affinity", "jemalloc", "system_malloc", "gloo_allreduce"} <= set(pl.skipped)
    assert "CPU-only" in pl.skipped["affinity"] and pl.runs["recipe"][1:] == ({}, None)
    assert pl.recipe.compile and pl.recipe.attn_implementation == "sdpa"  # the GPU keeps its flash kernels
    assert pl.skipped["sdpa_attention"] == "the recipe already runs this way here"
    assert "already runs bf16" in pl.skipped["bf16"] and "fp32" in pl.runs
    from workshop.launch.torchrun import torchrun_command

    cmd = torchrun_command(pl.runs["recipe"][0].to_argv(), nproc_per_node=4)
    assert "--nproc-per-node=4" in cmd and cmd[cmd.index("--backend") + 1] == "nccl"
    spec = json.loads(probe.child_command({"device": "cuda", "rank": 3})[-1])
    assert spec["device"] == "cuda"
    # the peaks are plan.rates.GPUS (the data sheets), matched by the name the driver reports
    assert machine.gpu_peak("NVIDIA H100 80GB HBM3")["bf16_tflops"] == 989.0
    assert machine.gpu_peak("NVIDIA H100 PCIe")["bf16_tflops"] == 756.0
    assert machine.gpu_peak("NVIDIA A100-SXM4-40GB")["bf16_tflops"] == 312.0
    assert machine.gpu_peak("NVIDIA L4")["bf16_tflops"] == 121.0  # not the L40S
    with pytest.raises(WorkshopError, match="no bf16 peak known for GPU 'Tesla T4'.*--peak-tflops"):
        machine.gpu_peak("Tesla T4")
    monkeypatch.setattr(
        rounds, "machine", lambda device: {**FAKE_CPU, "gpu": "NVIDIA H100 80GB HBM3", "gpus": 4}
    )
    calls: list = []
    cfg = recipe_cfg(kit_cache, tmp_path, device="cuda", nproc=4, threads=None, rounds=1, levers=("fp32",))
    res = rounds.run(
        cfg,
        trainer=fake_trainer({"recipe": 2000.0, "fp32": 1000.0}, calls),
        prober=fake_prober({"bf16": 400_000.0, "fp32": 50_000.0}),
        echo=lambda *_: None,
    )
    assert res["peaks"]["bf16_tflops"] == pytest.approx(4 * 989.0)
    assert res["levers"]["recipe"]["mfu_pct_of_peak"]["median"] > 0
    assert res["targets"]["bf16_over_fp32"]["value"] == pytest.approx(2.0)


@pytest.mark.slow
def test_real_ceiling_run_tiny(kit_cache, tmp_path):
    """One real `bench ceiling`: GEMM ranks and 2-rank training runs; every measured lever has a sane
    ratio."""
    out = tmp_path / "ceiling.json"
    rc = bench_command(
        [
            "ceiling",
            "--model",
            "tiny",
            "--seq-len",
            "128",  # test_bench's workbook recipe shape: on a fresh machine the compile it cached is reused
            "--steps",
            "3",
            "--rounds",
            "1",
            "--levers",
            "no_compile",
            "--gemm-seconds",
            "0.1",
            "--cache-dir",
            str(kit_cache),
            "--out-dir",
            str(tmp_path / "runs"),
            "--json-out",
            str(out),
            "--images-dir",
            str(tmp_path),
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    measured = {n: lv for n, lv in res["levers"].items() if lv["status"] == "measured"}
    assert set(measured) == {"recipe", "no_compile"}
    for lv in measured.values():
        assert 0 < lv["pct_of_ceiling"]["median"] / 100 <= 1.5
    assert res["machine"]["cpu_model"] and res["isa_path"] and res["versions"]["deepspeed"]


def test_a_lever_in_another_precision_is_not_the_best_step():
    """fp32 on an AMX CPU fills more of fp32's far lower ceiling at half the speed: no step closer to the
    machine's."""

    def lever(pct, precision, effect=1.0):
        return {
            "status": "measured",
            "precision": precision,
            "pct_of_ceiling": {"median": pct},
            "effect_vs_base": {"median": effect},
        }

    res = {
        "precision": "bf16",
        "levers": {
            "recipe": lever(23.0, "bf16"),
            "micro_batch_x2": lever(33.0, "bf16", 1.18),
            "fp32": lever(67.0, "fp32", 0.53),
        },
    }
    t = result.targets(res)
    assert (
        t["step_pct_of_ceiling"]["best_lever"] == "micro_batch_x2"
        and t["step_pct_of_ceiling"]["verdict"] == "missed by 45%"
    )
    assert (
        t["bf16_over_fp32"]["value"] == pytest.approx(1 / 0.53) and t["bf16_over_fp32"]["verdict"] == "missed"
    )


def test_the_stored_amx_result_names_the_other_ceiling_and_its_figure_no_target(tmp_path, monkeypatch):
    """The fp32 row of a bf16 run is % of the fp32 ceiling: the table and the figure say so, and the figure a
    learner sees in chapter 04 draws no target line (targets live in benchmarks/, not in the notebooks)."""
    import matplotlib.pyplot as plt

    res = json.loads((RESULTS_DIR / "ceiling.json").read_text())
    assert res["precision"] == "bf16" and res["levers"]["fp32"]["status"] == "measured"
    rows = {r["lever"]: r for r in ceiling_table.rows(res)}
    assert rows["fp32"]["ceiling_of"] == "fp32 ceiling" and rows["micro_batch_x2"]["ceiling_of"] is None
    table = ceiling_table.format_table(list(rows.values())).splitlines()
    assert [x for x in table if "of the fp32 ceiling" in x] == [x for x in table if x.startswith("| fp32 |")]
    texts: list[str] = []
    real_savefig = plt.Figure.savefig

    def grab(fig, *a, **k):
        texts.extend(t.get_text() for ax in fig.axes for t in ax.texts + ax.get_yticklabels())
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", grab)
    ceiling_table.figure(res, tmp_path / "c.png")
    assert "fp32\n(of the fp32 ceiling)" in texts and not any("target" in t for t in texts)


def test_a_gemm_probe_rank_imports_no_plotting():
    """Every probe rank imports this package first: its figures' matplotlib waits until a figure is asked
    for (0.6 s of CPU per probe rank, 8 probe ranks in chapter 04), and the package's names still resolve."""
    code = "import sys, workshop.experiments.ceiling.probe\nprint('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
    from workshop.experiments import ceiling
    from workshop.experiments.ceiling.table import rows

    assert ceiling.rows is rows and "no_compile" in ceiling.LEVERS and callable(ceiling.run)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ceiling.nope  # noqa: B018
