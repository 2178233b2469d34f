"""Measure the planner's two unverified rates on a lent machine (a 16-core Xeon beside one H100).

(a) CPU: bf16 vs fp32 GEMM (chapter 01's `gemm_benchmark`) and training tokens/s of the workbook's `small`
    preset at 1, 4, 8, 16 threads in one rank (plain torch: forward + backward + fused AdamW, bf16 weights),
    and 2 ranks x 8 threads under DDP/gloo, so the thread-scaling factor the planner assumes (0.5) is
    measured: tokens/s at N threads / (N x tokens/s at 1 thread).
(b) GPU: a training step (bf16 autocast, fp32 weights, fused AdamW, plain torch) of transformers'
    LlamaForCausalLM built from the workbook's presets (no hub): `llama-3.2-1b`, and `llama-3-8b` cut to
    4 of its 32 layers; tokens/s and MFU = 6 x params x tokens/s / the H100's dense bf16 peak as
    workshop.plan.rates.GPUS gives it (989 TFLOPS; the stored 2026-11-26 result used 989.4).

One script, one call: `python benchmarks/device_rates.py --out DIR` writes DIR/device_rates.json after every
phase (a timeout keeps what finished) and DIR/log.txt. `--dry-run` runs every phase at toy sizes on this
machine's CPU, so the device call cannot fail on a typo. Children (`--child JSON`) run one measurement in a
fresh process, so each thread count starts with a clean OpenMP pool.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASELINE = re.compile(r"^(mb\d+_x1|ddp\d+x1_.*_same_ranks_x1)$")  # a 1-thread run against itself: 1.0
HERE = Path(__file__).resolve()
METHOD = {
    "cpu_gemm": "workshop.plan.gemm.gemm_benchmark (chapter 01): square n x n torch.mm, median of repeats",
    "cpu_train": "plain torch, one process per setting: the workbook's preset (build_config) as "
    "transformers' LlamaForCausalLM, bf16 weights (no fp32 masters), sdpa attention, no torch.compile, "
    "torch.optim.AdamW(fused=True); random token ids; DDP over gloo for 2 ranks, each rank pinned to its own "
    "cores; DeepSpeed (ZeRO-3) is not installed on the device image, so no ZeRO lever ran",
    "gpu_train": "plain torch on one GPU: LlamaForCausalLM from a preset's LlamaConfig (no hub), fp32 "
    "weights, torch.autocast bf16, torch.optim.AdamW(fused=True), no ZeRO, no torch.compile, no activation "
    "checkpointing; random token ids",
    "thread_scaling": "tokens/s at N threads / (N x tokens/s at 1 thread), same micro-batch",
    "cpu_mfu": "plan.models.flops_per_token x tokens/s / (1,024 FLOP/cycle/core x cores x detected clock)",
    "gpu_gemm": "n x n bf16 a @ b on random data after 3 warm-up products: mean seconds per product of "
    "workshop.plan.timer.seconds_per_call (torch.cuda.synchronize after each, at least 10 products and 1 s)",
    "gpu_mfu": "mfu_6N = 6 x all params x tokens/s / peak_tflops (workshop.plan.rates.GPUS['H100'], dense "
    "bf16); mfu_6N_plus_attention = the workbook's count "
    "(plan.models.flops_per_token: input embedding excluded, attention added) over the same peak",
    "timing": "median of the timed steps after warm-up steps; GPU synchronized around each step",
}


def h100_peak_flops() -> float:
    """The H100's dense bf16 peak in FLOP/s, from the planner's data sheets (workshop.plan.rates.GPUS)."""
    from workshop.plan.rates import GPUS

    return GPUS["H100"].bf16_tflops * 1e12


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------ the machine


def machine() -> dict:
    """CPU identity and flags (the workbook's detect), torch/transformers versions, the GPU if any."""
    import torch
    import transformers

    from workshop.plan.hardware import detect

    d = detect(probe_onednn=True)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    keep = ("Model name", "Thread(s) per core", "Core(s) per socket", "Socket(s)", "NUMA node", "CPU(s)")
    out = {
        "detect": dict(d),
        "lscpu": {
            k.strip(): v.strip()
            for k, _, v in (ln.partition(":") for ln in lscpu.splitlines())
            if k.strip().startswith(keep)
        },
        "os_cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        out["gpu"] = {
            "name": p.name,
            "memory_gib": round(p.total_memory / 2**30, 1),
            "sms": p.multi_processor_count,
        }
    return out


# ------------------------------------------------------------------ one training measurement (a child)


def _timed_steps(step, steps: int, warmup: int, sync) -> list[float]:
    """Seconds of each timed step, after `warmup` untimed ones."""
    times = []
    for i in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def cpu_train(spec: dict) -> dict:
    """One rank's plain-torch step of a workbook preset on `threads` threads: bf16 weights, fused AdamW."""
    if spec.get("ddp"):  # each rank on its own cores: rank r gets cpus [r*t, (r+1)*t)
        rank, t = int(os.environ.get("LOCAL_RANK", "0")), spec["threads"]
        if (rank + 1) * t <= (os.cpu_count() or 1):
            os.sched_setaffinity(0, range(rank * t, (rank + 1) * t))
    import torch
    from transformers import LlamaForCausalLM

    from workshop.plan.models import build_config

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    cfg = build_config(spec["model"], attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    world = 1
    if spec.get("ddp"):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        dist.init_process_group("gloo")
        world = dist.get_world_size()
        model = DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg.vocab_size, (spec["micro_batch"], spec["seq_len"]))

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = _timed_steps(step, spec["steps"], spec["warmup"], lambda: None)
    med = statistics.median(times)
    tokens = spec["micro_batch"] * spec["seq_len"] * world
    out = {
        **spec,
        "world": world,
        "step_s": times,
        "median_step_s": med,
        "tokens_per_s": tokens / med,
        "torch_threads": torch.get_num_threads(),
    }
    if spec.get("ddp"):
        import torch.distributed as dist

        rank = dist.get_rank()
        dist.destroy_process_group()
        if rank != 0:
            return {}
    return out


def gpu_train(spec: dict) -> dict:
    """One LlamaForCausalLM training step on the GPU: fp32 weights, bf16 autocast, fused AdamW."""
    import torch
    from transformers import LlamaForCausalLM

    from workshop.plan.models import build_config

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    cfg = build_config(spec["preset"], num_hidden_layers=spec["layers"], attn_implementation=spec["attn"])
    with torch.device(dev):
        model = LlamaForCausalLM(cfg)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev == "cuda")
    ids = torch.randint(0, cfg.vocab_size, (spec["micro_batch"], spec["seq_len"]), device=dev)

    def step() -> None:
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = _timed_steps(step, spec["steps"], spec["warmup"], sync)
    med = statistics.median(times)
    tps = spec["micro_batch"] * spec["seq_len"] / med
    emb = cfg.vocab_size * cfg.hidden_size
    peak = h100_peak_flops()
    return {
        **spec,
        "device": dev,
        "params": params,
        "embedding_params": emb,
        "step_s": times,
        "median_step_s": med,
        "tokens_per_s": tps,
        "peak_tflops": peak / 1e12,
        "mfu_6N": 6 * params * tps / peak,
        "mfu_6N_plus_attention": _flops_per_token(cfg, params, spec["seq_len"]) * tps / peak,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if dev == "cuda" else None,
    }


def _flops_per_token(cfg, params: int, seq_len: int) -> float:
    """The workbook's count (plan.models.flops_per_token): 6 x matmul params + 12 x layers x hidden x seq."""
    from workshop.plan.models import flops_per_token

    return flops_per_token(
        params,
        layers=cfg.num_hidden_layers,
        hidden=cfg.hidden_size,
        seq_len=seq_len,
        vocab=cfg.vocab_size,
        tied=bool(cfg.tie_word_embeddings),
    )


def gpu_gemm(n: int) -> dict:
    """The GPU's bf16 matmul ceiling on random data: TFLOPS of back-to-back products after warm-up, timed by
    the package's one kernel timer (workshop.plan.timer)."""
    import torch

    from workshop.plan.timer import seconds_per_call

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA"}
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s = seconds_per_call(lambda: a @ b, min_seconds=1.0, min_calls=10, sync=torch.cuda.synchronize)
    return {"n": n, "tflops": 2 * n**3 / s / 1e12}


def child(spec: dict) -> dict:
    kind = spec.pop("kind")
    if kind == "cpu_train":
        return cpu_train(spec)
    if kind == "gpu_train":
        return gpu_train(spec)
    raise SystemExit(f"unknown child kind {kind!r}")


# ------------------------------------------------------------------ the parent: run children, keep going


def run_child(spec: dict, timeout: float, env: dict | None = None, nproc: int = 1) -> dict:
    """Run one measurement in a fresh process (torchrun for nproc > 1); its last stdout line is its JSON."""
    arg = json.dumps(spec)
    if nproc > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            str(HERE),
            "--child",
            arg,
        ]
    else:
        cmd = [sys.executable, str(HERE), "--child", arg]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(_root()), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {**spec, "error": f"timed out after {timeout:.0f} s"}
    log_text = (p.stderr or "")[-3000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {**spec, "error": f"exit {p.returncode}", "stderr_tail": log_text}
    got = json.loads(lines[-1][len("RESULT ") :])
    got["wall_s"] = round(time.perf_counter() - t0, 1)
    return got


def _root() -> Path:
    """The folder that holds the `workshop` package this script imports (the checkout, or a carried copy)."""
    for d in (HERE.parent, HERE.parent.parent):
        if (d / "workshop" / "__init__.py").is_file():
            return d
    return HERE.parent.parent


def thread_env(threads: int) -> dict:
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def cpu_phase(cfg: dict, out: dict, save) -> None:
    """GEMM bf16 vs fp32 per thread count, then training tokens/s at each thread count and 2 x 8 DDP."""
    from workshop.plan.gemm import gemm_benchmark

    out.update(gemm=[], train=[])
    log("cpu: GEMM (chapter 01's gemm_benchmark)")
    for r in gemm_benchmark(cfg["gemm_sizes"], ("bf16", "fp32"), cfg["threads"], repeats=cfg["gemm_repeats"]):
        out["gemm"].append(r.as_dict())
        log(f"  gemm {r.size} {r.dtype} x{r.threads}: {r.median:.3f} TFLOPS")
    save()
    for t, mb in cfg["train_runs"]:
        spec = {"kind": "cpu_train", **cfg["train"], "threads": t, "micro_batch": mb}
        got = run_child(spec, cfg["child_timeout"], thread_env(t))
        out["train"].append(got)
        log(f"  train 1 rank x {t} threads, mb {mb}: {got.get('tokens_per_s', got.get('error'))} tok/s")
        save()
    out["train_ddp"] = []
    for r, t in cfg["ddp"]:
        spec = {"kind": "cpu_train", **cfg["train"], "threads": t, "ddp": True}
        got = {**run_child(spec, cfg["child_timeout"], thread_env(t), nproc=r), "ranks": r}
        out["train_ddp"].append(got)
        log(f"  train {r} ranks x {t} threads (DDP gloo): {got.get('tokens_per_s', got.get('error'))} tok/s")
        save()


def gpu_phase(cfg: dict, out: dict, save) -> None:
    """The GEMM ceiling, then each model's step; an OOM halves the micro-batch once and tries again."""
    out.update(gemm=gpu_gemm(cfg["gemm_n"]), train=[])
    log(f"gpu: gemm {out['gemm']}")
    save()
    for run in cfg["runs"]:
        spec = {"kind": "gpu_train", **run}
        got = run_child(dict(spec), cfg["child_timeout"])
        if "error" in got and "OutOfMemory" in got.get("stderr_tail", "") and run["micro_batch"] > 1:
            got = run_child({**spec, "micro_batch": run["micro_batch"] // 2}, cfg["child_timeout"])
        out["train"].append(got)
        tps, mfu = got.get("tokens_per_s", "ERR"), got.get("mfu_6N", got.get("error"))
        log(f"  {run['name']} {run['attn']} mb{got.get('micro_batch')}: {tps} tok/s, mfu {mfu}")
        save()


# ------------------------------------------------------------------ what the numbers say


def derive(res: dict) -> dict:
    """Thread scaling (tokens/s at N / (N x at 1), per micro-batch), the CPU step's share of the AMX peak, the
    largest GEMM per dtype and thread count, the GPU's MFU."""
    out: dict = {}
    cpu = res.get("cpu", {})
    ok = [r for r in cpu.get("train", []) if "tokens_per_s" in r]
    ddp = [r for r in cpu.get("train_ddp", []) if "tokens_per_s" in r]
    ones = {r["micro_batch"]: r["tokens_per_s"] for r in ok if r["threads"] == 1}
    ddp_one = {r["ranks"]: r["tokens_per_s"] for r in ddp if r["threads"] == 1}
    out["thread_scaling"] = {
        f"mb{r['micro_batch']}_x{r['threads']}": r["tokens_per_s"] / (r["threads"] * ones[r["micro_batch"]])
        for r in ok
        if r["micro_batch"] in ones
    }
    for r in ddp:  # against 1 rank x 1 thread, and against the same ranks at 1 thread each
        key = f"ddp{r['ranks']}x{r['threads']}_mb{r['micro_batch']}"
        cores = r["ranks"] * r["threads"]
        if r["micro_batch"] in ones:
            out["thread_scaling"][key + "_vs_1x1"] = r["tokens_per_s"] / (cores * ones[r["micro_batch"]])
        if r["ranks"] in ddp_one:
            out["thread_scaling"][key + "_vs_same_ranks_x1"] = r["tokens_per_s"] / (
                r["threads"] * ddp_one[r["ranks"]]
            )
    if ok:
        out["cpu_mfu_of_amx_peak"] = _cpu_mfu(res, ok + ddp)
    gemm = cpu.get("gemm", [])
    big = max((g["size"] for g in gemm), default=None)
    out["gemm_tflops_largest"] = {
        f"{g['dtype']}_x{g['threads']}": g["median_tflops"] for g in gemm if g["size"] == big
    }
    out["gpu"] = {
        f"{r['name']}_{r['attn']}_mb{r['micro_batch']}": {
            k: r.get(k) for k in ("tokens_per_s", "mfu_6N", "mfu_6N_plus_attention", "params", "peak_mem_gib")
        }
        for r in res.get("gpu", {}).get("train", [])
        if "tokens_per_s" in r
    }
    return out


def _cpu_mfu(res: dict, runs: list[dict]) -> dict:
    """Model FLOP rate over the AMX bf16 peak of the cores used (1,024 FLOP/cycle/core at the host's clock),
    counted as chapter 04 counts it (plan.models.flops_per_token): comparable with ceiling.json's share."""
    from workshop.plan.hardware import peak_tflops
    from workshop.plan.models import architecture, flops_per_token

    clock = res.get("machine", {}).get("detect", {}).get("clock_ghz")
    if not clock:
        return {"skipped": "no clock known"}
    out = {}
    for r in runs:
        a = architecture(r["model"])
        fpt = flops_per_token(
            a.params,
            layers=a.layers,
            hidden=a.hidden,
            seq_len=r["seq_len"],
            vocab=a.vocab,
            tied=a.tied_embeddings,
        )
        cores = r.get("ranks", 1) * r["threads"]
        key = f"{r.get('ranks', 1)}x{r['threads']}_mb{r['micro_batch']}"
        out[key] = fpt * r["tokens_per_s"] / (peak_tflops("amx_bf16", cores, clock).tflops * 1e12)
    return out


def versus_planner(res: dict) -> dict:
    """The measured numbers beside the rates workshop.plan.rates assumes today (read, never changed here)."""
    from workshop.plan import calibration, rates

    d, out = res["derived"], {}
    scaling, scaling_range = calibration.cpu_thread_scaling()
    assumed = scaling.value
    ts = d.get("thread_scaling", {})
    out["cpu_thread_scaling"] = {
        "assumed": assumed,
        "assumed_range": list(scaling_range),
        "measured": ts,
        "assumed_over_measured": {k: assumed / v for k, v in ts.items() if not BASELINE.match(k)},
    }
    mfu = d.get("cpu_mfu_of_amx_peak", {})
    planned = {e: calibration.cpu_efficiency(e).value for e in rates.CPU_ENGINES}
    out["cpu_rate_of_amx_peak"] = {
        "planner": planned,
        "planner_clock_basis_ghz": calibration.cpu_clock_basis().value,
        "measured": mfu,
        "planner_deepspeed_over_measured": {k: planned["deepspeed"] / v for k, v in mfu.items() if v},
    }
    gpu = d.get("gpu", {})
    out["gpu_mfu"] = {
        "planner": {k: r.value for k, r in rates.GPU_STACKS.items()},
        "peak_tflops": h100_peak_flops() / 1e12,
        "measured_workbook_count": {k: r["mfu_6N_plus_attention"] for k, r in gpu.items()},
        "measured_6N": {k: r["mfu_6N"] for k, r in gpu.items()},
        "planner_hf_deepspeed_over_measured": {
            k: rates.GPU_MFU.value / r["mfu_6N_plus_attention"] for k, r in gpu.items()
        },
    }
    return out


# ------------------------------------------------------------------ the plan of one call


def plan(dry_run: bool, ncpu: int) -> dict:
    """What to measure: the device's sizes, or toy sizes that exercise every path in seconds here."""
    if dry_run:
        return {
            "cpu": {
                "gemm_sizes": (64, 128),
                "gemm_repeats": 2,
                "threads": [1, 2],
                "ddp": [(2, 1)],
                "train_runs": [(1, 2), (2, 2)],  # the device's sizes differ; the paths do not
                "child_timeout": 300,
                "train": {"model": "tiny", "seq_len": 32, "micro_batch": 2, "steps": 2, "warmup": 1},
            },
            "gpu": {
                "gemm_n": 256,
                "child_timeout": 300,
                "runs": [
                    {
                        "name": "tiny",
                        "preset": "tiny",
                        "layers": 4,
                        "attn": a,
                        "seq_len": 32,
                        "micro_batch": 2,
                        "steps": 2,
                        "warmup": 1,
                    }
                    for a in ("sdpa",)  # eager is the same path with another attention name
                ],
            },
        }
    threads = [t for t in (1, 2, 4, 8, 16) if t <= ncpu]
    big = [(t, 16) for t in (1, max(threads))]  # micro-batch 16: GEMMs 4x taller, does scaling follow size?
    return {
        "cpu": {
            "gemm_sizes": (1024, 2048),
            "gemm_repeats": 5,
            "threads": threads,
            "ddp": [(2, 1), (2, max(1, ncpu // 2))],
            "train_runs": [(t, 4) for t in threads] + big,
            "child_timeout": 120,
            "train": {"model": "small", "seq_len": 256, "micro_batch": 4, "steps": 5, "warmup": 2},
        },
        "gpu": {
            "gemm_n": 8192,
            "child_timeout": 150,
            "runs": [
                {
                    "name": "llama3.2-1b",
                    "preset": "llama-3.2-1b",
                    "layers": 16,
                    "attn": "sdpa",
                    "seq_len": 2048,
                    "micro_batch": 8,
                    "steps": 8,
                    "warmup": 3,
                },
                {
                    "name": "llama3.2-1b",
                    "preset": "llama-3.2-1b",
                    "layers": 16,
                    "attn": "eager",
                    "seq_len": 2048,
                    "micro_batch": 2,
                    "steps": 6,
                    "warmup": 2,
                },
                {
                    "name": "llama3-8b-4of32",
                    "preset": "llama-3-8b",
                    "layers": 4,
                    "attn": "sdpa",
                    "seq_len": 2048,
                    "micro_batch": 4,
                    "steps": 8,
                    "warmup": 3,
                },
            ],
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="folder for device_rates.json and log.txt")
    ap.add_argument("--dry-run", action="store_true", help="toy sizes on this CPU: checks every path")
    ap.add_argument("--parts", default="gpu,cpu", help="comma list of gpu, cpu (in that order of running)")
    ap.add_argument("--compare", type=Path, help="a device_rates.json: add the planner's rates beside it")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compare:
        res = json.loads(args.compare.read_text())
        res.setdefault("method", METHOD)
        smi = args.compare.parent / "nvidia-smi.txt"
        if smi.is_file():  # the query line the device command wrote beside the JSON
            res["machine"]["nvidia_smi"] = smi.read_text().strip().splitlines()[-2:]
        res["derived"] = derive(res)
        res["versus_planner"] = versus_planner(res)
        print(json.dumps(res, indent=1, default=str))
        return 0
    if args.child:
        got = child(json.loads(args.child))
        if got:
            print("RESULT " + json.dumps(got), flush=True)
        return 0
    if args.out is None:
        ap.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "device_rates.json"
    cfg = plan(args.dry_run, os.cpu_count() or 1)
    res: dict = {
        "benchmark": "device_rates",
        "dry_run": args.dry_run,
        "method": METHOD,
        "config": cfg,
        "machine": machine(),
    }
    t0 = time.perf_counter()

    def save() -> None:
        res["wall_s"] = round(time.perf_counter() - t0, 1)
        res["derived"] = derive(res)
        path.write_text(json.dumps(res, indent=1, default=str) + "\n")

    save()
    for part in args.parts.split(","):
        phase = {"gpu": gpu_phase, "cpu": cpu_phase}[part]
        res[part] = {}
        try:
            phase(cfg[part], res[part], save)
        except Exception as exc:  # noqa: BLE001 - one phase failing must not lose the other's numbers
            res[part + "_error"] = repr(exc)
            log(f"{part} failed: {exc!r}")
        save()
    log("derived: " + json.dumps(res["derived"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
