"""`workshop bench ceiling`: the training step's FLOP rate as a share of THIS machine's own matmul ceiling.

MFU against a datasheet peak mixes two gaps: how far the GEMM library is from the peak (clock, ISA, shapes)
and how far the training step is from the GEMMs it is made of (framework overhead, optimizer, attention,
memory). Only the second is ours to close, so one run measures both on the same cores: the GEMM rate at the
model's own matmul shapes (tokens per micro-batch x the preset's q/k/v/o, gate/up/down and lm_head weights,
forward and both backward GEMMs), with the ranks and threads the training uses, running at the same time; then
the training step's model-FLOP rate, once per lever, every lever against its base in interleaved rounds.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from workshop.errors import (
    WorkshopError,
    check_choice,
    check_output,
    check_positive,
    comma_list,
    read_text,
    report,
)
from workshop.experiments.measure import (
    Stats,
    StatsRecord,
    flops_per_token,
    interleave,
    mfu,
    paired_ratios,
    peaks_for,
    save,
)
from workshop.experiments.recipes import WORKBOOK_ALLOCATOR, WORKBOOK_ENGINE, run_argv, runnable_here
from workshop.lang import _
from workshop.launch import torchrun
from workshop.launch.torchrun import allocator_env, check_fits, rank_env, run_torchrun
from workshop.paths import IMAGES_DIR, RESULTS_DIR
from workshop.plan import hardware
from workshop.plan.models import PRESETS, Architecture, architecture, build_config
from workshop.report.plots import plot_ceiling
from workshop.report.verdict import Comparison, compare, share, steady
from workshop.train import TrainArgs, parse_args
from workshop.train.data import build_corpus
from workshop.train.guard import versions

DEVICES = ("cpu", "cuda")
TARGET_PCT_OF_CEILING = 60.0

# ---------------------------------------------------------------- the model's matmuls


@dataclass(frozen=True)
class Linear:
    """One weight matrix of the model: y[tokens, out] = x[tokens, inp] @ W.T, `count` times per forward."""

    name: str
    inp: int
    out: int
    count: int

    def train_flops(self, tokens: int) -> float:
        """Forward (x W^T), input gradient (dy W) and weight gradient (dy^T x): three GEMMs of 2*T*in*out."""
        return 6.0 * tokens * self.inp * self.out * self.count


def linear_shapes(config) -> list[Linear]:
    """The matmul weights of a LlamaConfig: per layer q, k, v, o, gate, up, down; then the output head.

    The input embedding is a lookup (no GEMM) unless tied to the head, which is counted once as lm_head.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    heads, kv = config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    inter = config.intermediate_size
    return [
        Linear("q_proj", h, heads * head_dim, layers),
        Linear("k_proj", h, kv * head_dim, layers),
        Linear("v_proj", h, kv * head_dim, layers),
        Linear("o_proj", heads * head_dim, h, layers),
        Linear("gate_proj", h, inter, layers),
        Linear("up_proj", h, inter, layers),
        Linear("down_proj", inter, h, layers),
        Linear("lm_head", h, config.vocab_size, 1),
    ]


def distinct_shapes(shapes: list[Linear]) -> dict[tuple[int, int], list[str]]:
    """(in, out) -> the weights with that shape: each shape is timed once (q and o of a square model share
    one)."""
    out: dict[tuple[int, int], list[str]] = {}
    for s in shapes:
        out.setdefault((s.inp, s.out), []).append(s.name)
    return out


# ---------------------------------------------------------------- the GEMM ceiling (child processes)

_TORCH_DTYPES = ("fp32", "bf16")


def gemm_child(spec: dict) -> dict:
    """One rank's share of the ceiling: the three training GEMMs of every distinct shape, timed after a
    barrier.

    All ranks start timing together (a file per rank in `ready_dir`), so they contend for the same memory and
    caches the training ranks do. Each GEMM repeats for at least `min_seconds`.
    """
    import torch

    rank, nproc = spec["rank"], spec["nproc"]
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    dev = torch.device(f"cuda:{rank}" if spec["device"] == "cuda" else "cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["dtype"]]

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    m = spec["tokens"]
    cases = []
    for inp, out in spec["shapes"]:
        x = torch.randn(m, inp, dtype=dtype, device=dev)
        w = torch.randn(out, inp, dtype=dtype, device=dev)
        dy = torch.randn(m, out, dtype=dtype, device=dev)
        cases.append(
            (
                (inp, out),
                {
                    "fwd": lambda x=x, w=w: x @ w.t(),
                    "dx": lambda dy=dy, w=w: dy @ w,
                    "dw": lambda dy=dy, x=x: dy.t() @ x,
                },
            )
        )
        for fn in cases[-1][1].values():  # warm-up: oneDNN/cuBLAS kernel selection and first-touch pages
            fn()
    sync()
    ready = Path(spec["ready_dir"])
    (ready / f"rank{rank}").touch()
    deadline = time.time() + 300
    while len(list(ready.glob("rank*"))) < nproc:
        if time.time() > deadline:
            raise WorkshopError(f"GEMM probe rank {rank}: the other ranks never got ready in {ready}")
        time.sleep(0.01)
    res = []
    for (inp, out), fns in cases:
        row = {"inp": inp, "out": out}
        for key, fn in fns.items():
            n, t0 = 0, time.perf_counter()
            while True:
                fn()
                n += 1
                sync()
                elapsed = time.perf_counter() - t0
                if elapsed >= spec["min_seconds"] and n >= 2:
                    break
            row[f"{key}_s"] = elapsed / n
        res.append(row)
    return {"rank": rank, "threads": torch.get_num_threads(), "shapes": res}


def ceiling_from_children(children: list[dict], shapes: list[Linear], tokens: int) -> dict:
    """The machine's matmul ceiling from every rank's timings: ranks run at once, so their rates add up.

    A rank's rate is the step's linear-layer FLOPs over the time its GEMMs alone take (each shape weighted
    by how often the model uses it); per shape, the same.
    """
    per_shape = []
    flops = sum(s.train_flops(tokens) for s in shapes)
    total_rate = 0.0
    for child in children:
        times = {(r["inp"], r["out"]): r["fwd_s"] + r["dx_s"] + r["dw_s"] for r in child["shapes"]}
        total_rate += flops / sum(times[(s.inp, s.out)] * s.count for s in shapes)
    for (inp, out), names in distinct_shapes(shapes).items():
        rate = sum(
            6.0
            * tokens
            * inp
            * out
            / next(
                r["fwd_s"] + r["dx_s"] + r["dw_s"] for r in c["shapes"] if (r["inp"], r["out"]) == (inp, out)
            )
            for c in children
        )
        per_shape.append({"weights": names, "gemm": f"{tokens}x{inp}x{out}", "tflops": rate / 1e12})
    return {"tflops": total_rate / 1e12, "linear_flops_per_step_per_rank": flops, "per_shape": per_shape}


def gemm_ceiling(
    shapes: list[Linear],
    *,
    tokens: int,
    dtype: str,
    nproc: int,
    threads: int | None,
    device: str = "cpu",
    min_seconds: float = 0.25,
    timeout: float = 600,
) -> dict:
    """Start `nproc` GEMM ranks at once (the environment the training ranks get) and combine their timings."""

    check_choice("dtype", dtype, _TORCH_DTYPES)
    check_choice("device", device, DEVICES)
    with tempfile.TemporaryDirectory(prefix="workshop-ceiling-") as ready:
        procs = []
        for rank in range(nproc):
            spec = {
                "rank": rank,
                "nproc": nproc,
                "threads": threads,
                "device": device,
                "dtype": dtype,
                "tokens": tokens,
                "shapes": list(distinct_shapes(shapes)),
                "min_seconds": min_seconds,
                "ready_dir": ready,
            }
            procs.append(
                subprocess.Popen(
                    child_command(spec),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=rank_env(threads, nproc_per_node=nproc, cpu_only=device == "cpu"),
                )
            )
        outs = [p.communicate(timeout=timeout) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"GEMM probe failed (exit {p.returncode}): {err.strip()[-2000:]}")
    children = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    return {
        "dtype": dtype,
        "tokens": tokens,
        "nproc": nproc,
        "threads": threads,
        "device": device,
        **ceiling_from_children(children, shapes, tokens),
        "children": children,
    }


def child_command(spec: dict) -> list[str]:
    return [sys.executable, "-m", "workshop.experiments.ceiling", "--child", json.dumps(spec)]


# ---------------------------------------------------------------- machine and peaks

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's datasheets; the first matching name wins.
GPU_BF16_PEAKS: tuple[tuple[str, float, str], ...] = (
    ("H100 PCIe", 756.0, "NVIDIA H100 PCIe datasheet, bf16 dense"),
    ("H100", 989.4, "NVIDIA H100 SXM5 datasheet, bf16 dense"),
    ("H200", 989.4, "NVIDIA H200 SXM datasheet, bf16 dense"),
    ("A100", 312.0, "NVIDIA A100 datasheet, bf16 dense"),
    ("L40S", 362.1, "NVIDIA L40S datasheet, bf16 dense"),
    ("L4", 121.0, "NVIDIA L4 datasheet, bf16 dense"),
)


def gpu_peak(name: str, override: float | None = None) -> dict:
    """bf16 dense peak of one GPU by its name, or the --peak-tflops given; unknown names must be given one."""
    if override:
        check_positive("peak-tflops", override)
        return {"gpu": name, "bf16_tflops": override, "source": "--peak-tflops"}
    for key, tflops, source in GPU_BF16_PEAKS:
        if key.lower() in name.lower():
            return {"gpu": name, "bf16_tflops": tflops, "source": source}
    raise WorkshopError(
        f"no bf16 peak known for GPU {name!r}; known: {', '.join(k for k, _, _ in GPU_BF16_PEAKS)}"
        "; pass --peak-tflops"
    )


def isa_path(d: dict, precision: str) -> str:
    """The matmul path this precision takes on this CPU: AMX-bf16, AVX512_BF16, AVX512-fp32, AVX2-fp32, ..."""
    if precision == "bf16":
        if d.get("amx"):
            return "AMX-bf16"
        if d.get("avx512_bf16"):
            return "AVX512_BF16"
        return (
            "bf16 emulated through fp32 ("
            + ("AVX512" if d.get("avx512f") else "AVX2" if d.get("avx2") else "scalar")
            + ")"
        )
    return "AVX512-fp32" if d.get("avx512f") else "AVX2-fp32" if d.get("avx2") else f"{d.get('arch')}-fp32"


def blas_info() -> str | None:
    """What torch's build uses for fp32 GEMM (BLAS_INFO in torch.__config__.show(): mkl, openblas, ...)."""
    import torch

    for part in torch.__config__.show().replace("\n", ",").split(","):
        if "BLAS_INFO=" in part:
            return part.split("=", 1)[1].strip()
    return None


def machine(device: str) -> dict:
    """CPU model, ISA flags, the oneDNN probe and library versions: what every number here depends on."""

    d = hardware.detect(probe_onednn=device == "cpu")
    native, why = hardware.native_bf16()
    out = {
        k: d.get(k)
        for k in (
            "cpu_model",
            "vendor",
            "arch",
            "cores",
            "logical_cpus",
            "clock_ghz",
            "clock_source",
            "isa_class",
            "torch_capability",
            "onednn_isa",
            "onednn_bf16_impl",
        )
    }
    out.update(
        isa_flags={k: d.get(k) for k in ("amx", "avx512f", "avx512_bf16", "avx2")},
        native_bf16=native,
        native_bf16_why=why,
        why=d.get("why"),
        blas=blas_info(),
        python=platform.python_version(),
        date=time.strftime("%Y-%m-%d"),
        versions=versions(),
    )
    if device == "cuda":
        import torch

        out["gpu"] = torch.cuda.get_device_name(0)
        out["gpus"] = torch.cuda.device_count()
    return out


# ---------------------------------------------------------------- levers


@dataclass(frozen=True)
class Lever:
    """One change to the workbook recipe: TrainArgs overrides and/or another allocator, measured against
    `base`.

    The recipe holds every lever that paid on the machines this was measured on, so most levers take one of
    them away (an ablation: what that part is worth here); the rest try what the recipe does not do."""

    name: str
    label: str
    about: str
    args: dict = field(default_factory=dict)
    allocator: str | None = None  # None: the recipe's (WORKBOOK_ALLOCATOR); else launch.ALLOCATORS
    base: str | None = "recipe"
    cpu_only: bool = False
    needs: tuple[str, ...] = ()  # requirements checked on this host: compiler, jemalloc, recipe_bf16, ...


ZERO3 = {"engine": "deepspeed", "zero_stage": 3}
UNCOMPILED = {"compile": False, "attn_implementation": "sdpa"}

LEVERS: dict[str, Lever] = {
    lv.name: lv
    for lv in [
        Lever(
            "recipe",
            "workbook recipe",
            "packed blocks, DDP, precision auto (bf16: bf16 weights with fp32 masters), "
            "torch.compile with eager attention, compiled AdamW step, shared-memory all-reduce, tcmalloc, 1 "
            "thread "
            "per rank (uncompiled where no C++ compiler is found)",
            base=None,
        ),
        Lever(
            "no_compile",
            "without torch.compile",
            "eager PyTorch (and SDPA attention, its best kernel there): every "
            "element-wise op a pass over memory, the optimizer in torch's fused AdamW plus separate casts",
            UNCOMPILED,
            needs=("recipe_compiled",),
        ),
        Lever(
            "sdpa_attention",
            "SDPA attention",
            "scaled_dot_product_attention's fused CPU kernel instead of the plain "
            "matmuls + softmax that Inductor fuses",
            {"attn_implementation": "sdpa"},
            needs=("recipe_compiled",),
        ),
        Lever(
            "adamw_unfused",
            "AdamW, not fused",
            "torch's per-tensor AdamW with separate clip and cast passes instead "
            "of one compiled pass per tensor",
            {"optimizer": "adamw_torch"},
        ),
        Lever(
            "gloo_allreduce",
            "gloo all-reduce",
            "DDP's gradients all-reduced by gloo over loopback TCP instead of "
            "DeepSpeed's shared-memory kernel",
            {"allreduce": "backend"},
            cpu_only=True,
        ),
        Lever(
            "system_malloc",
            "glibc malloc",
            "glibc's malloc instead of tcmalloc (LD_PRELOAD)",
            allocator="system",
            cpu_only=True,
            needs=("recipe_allocator",),
        ),
        Lever(
            "jemalloc",
            "jemalloc",
            "jemalloc with Intel's MALLOC_CONF instead of tcmalloc",
            allocator="jemalloc",
            cpu_only=True,
            needs=("jemalloc",),
        ),
        Lever(
            "autocast",
            "fp32 weights + bf16 autocast",
            "fp32 weights cast to bf16 on every forward (autocast) and "
            "fp32 gradients all-reduced, instead of bf16 weights with fp32 masters "
            "(workshop.train.master_weights)",
            {"master_weights": False},
            needs=("recipe_bf16",),
        ),
        Lever(
            "affinity",
            "pinned cores",
            "each rank pinned to its own cores (sched_setaffinity) with OMP_PROC_BIND=close, "
            "OMP_PLACES=cores set in the rank",
            {"pin_cores": True},
            cpu_only=True,
        ),
        Lever(
            "micro_batch_x2",
            "micro-batch x2",
            "twice the sequences per forward: GEMMs with twice the rows, the "
            "per-step costs (all-reduce, optimizer) spread over twice the tokens",
            {"micro_batch": "x2"},
        ),
        Lever(
            "grad_accum_x2",
            "micro-batch /2, GA 2",
            "half the micro-batch, 2 accumulation steps: the same samples "
            "per optimizer step in GEMMs half as tall",
            {"micro_batch": "/2", "grad_accum": 2},
        ),
        Lever(
            "seq_len_x2",
            "sequences x2, micro-batch /2",
            "the same tokens per forward in sequences twice as long: "
            "the same GEMMs, attention over twice the context",
            {"seq_len": "x2", "micro_batch": "/2"},
        ),
        Lever(
            "ddp_bucket_x4",
            "DDP buckets x4",
            "100 MB gradient buckets instead of DDP's 25 MB: fewer, larger "
            "all-reduces, the last one waiting for more of the backward",
            {"ddp_bucket_mb": 100},
        ),
        Lever(
            "zero3",
            "ZeRO-3 engine",
            "DeepSpeed ZeRO-3 instead of DDP, both uncompiled (against the uncompiled "
            "recipe); in bf16 it keeps bf16 weights + fp32 masters as the recipe does",
            {**ZERO3, **UNCOMPILED},
            base="no_compile",
        ),
        Lever(
            "ds_cpu_adam",
            "ZeRO-3 + DeepSpeed CPU Adam",
            "offload_optimizer: DeepSpeed's C++ CPU Adam instead of "
            "torch's fused AdamW (against the ZeRO-3 engine)",
            {**ZERO3, **UNCOMPILED, "offload_optimizer": True},
            base="zero3",
        ),
        Lever(
            "zero3_persist",
            "ZeRO-3, big persistence/prefetch",
            "stage3_param_persistence_threshold 1e7 (tensors "
            "up to 10M elements stay whole: no all-gather), stage3_prefetch_bucket_size 5e7 (against ZeRO-3)",
            {
                **ZERO3,
                **UNCOMPILED,
                "extra_ds": {
                    "stage3_param_persistence_threshold": int(1e7),
                    "stage3_prefetch_bucket_size": int(5e7),
                },
            },
            base="zero3",
        ),
        Lever(
            "fp32",
            "fp32",
            "fp32 weights and math instead of bf16 (only where the recipe resolves to bf16)",
            {"precision": "fp32", "master_weights": False},
            needs=("recipe_bf16",),
        ),
        Lever(
            "bf16",
            "bf16",
            "bf16 weights with fp32 masters instead of fp32 (only where the CPU or GPU has native bf16)",
            {"precision": "bf16"},
            needs=("native_bf16_recipe_fp32",),
        ),
    ]
}
DEFAULT_LEVERS = tuple(LEVERS)


def parse_levers(text: str | None) -> list[str]:
    """'no_compile,affinity' -> ['recipe', 'no_compile', 'affinity'] plus the bases they need; unknown names
    refused."""
    names = [n.strip() for n in (text or ",".join(DEFAULT_LEVERS)).split(",") if n.strip()]
    for n in names:
        check_choice("lever", n, LEVERS)
    out = ["recipe"]

    def add(n: str) -> None:
        base = LEVERS[n].base
        if base and base not in out:
            add(base)
        if n not in out:
            out.append(n)

    for n in names:
        add(n)
    return out


NO_COMPILER = "no C++ compiler on PATH: Inductor builds its CPU kernels with one (apt-get install g++)"


def requirement(
    needs: str, *, device: str, recipe_precision: str, gemm_ratio: float | None = None
) -> str | None:
    """None when the requirement is met here, else the reason the lever is skipped (recorded in the JSON)."""

    if needs == "recipe_compiled":
        return None if device != "cpu" or hardware.has_cxx_compiler() else NO_COMPILER
    if needs == "jemalloc":
        return (
            None
            if torchrun.allocator_path("jemalloc")
            else "jemalloc is not installed (apt-get install libjemalloc2)"
        )
    if needs == "recipe_allocator":
        chosen = allocator_env(WORKBOOK_ALLOCATOR)[1]
        return (
            None
            if chosen != "system"
            else (
                "the recipe already runs glibc malloc here: tcmalloc is not "
                "installed (apt-get install libtcmalloc-minimal4)"
            )
        )
    if needs == "recipe_bf16":
        return None if recipe_precision == "bf16" else "the recipe already runs fp32 here (precision auto)"
    if needs == "native_bf16_recipe_fp32":
        if recipe_precision == "bf16":
            return "the recipe already runs bf16 here (precision auto)"
        native, why = hardware.native_bf16() if device == "cpu" else (True, "")
        if not native:
            ratio = (
                f"; measured here: bf16 GEMM at the model's gate_proj shape runs at x{gemm_ratio:.3g} of fp32"
                if gemm_ratio
                else ""
            )
            return f"{why}{ratio}"
        return None
    raise WorkshopError(f"unknown lever requirement {needs!r}")


def lever_args(lever: Lever, recipe: TrainArgs) -> TrainArgs:
    """The TrainArgs of one lever: the recipe with the lever's overrides ('x2' and '/2' scale the
    micro-batch)."""
    known = {f.name for f in fields(recipe)}
    bad = sorted(set(lever.args) - known)
    if bad:
        raise WorkshopError(
            f"lever {lever.name} sets unknown TrainArgs fields {bad}; allowed: {', '.join(sorted(known))}"
        )
    overrides = dict(lever.args)
    for name in ("micro_batch", "seq_len"):
        value, have = overrides.get(name), getattr(recipe, name)
        if value == "x2":
            overrides[name] = have * 2
        elif value == "/2":
            if have < 2:
                raise WorkshopError(
                    f"lever {lever.name} halves {name.replace('_', '-')}, which is {have}; "
                    f"allowed: a recipe {name.replace('_', '-')} >= 2"
                )
            overrides[name] = have // 2
    args = replace(recipe, **overrides)
    args.validate()
    return args


def lever_env(lever: Lever, device: str = "cpu") -> tuple[dict, str | None]:
    """The extra rank environment of one lever and the allocator it names (the recipe's unless it names
    another; GPU ranks keep the system allocator: the host's malloc is not what bounds them)."""

    if device != "cpu":
        return {}, None
    return allocator_env(lever.allocator or WORKBOOK_ALLOCATOR)


# ---------------------------------------------------------------- the benchmark


@dataclass
class CeilingConfig:
    """What every lever shares: preset, shapes, steps, rounds, ranks and threads, device."""

    model: str = "tiny"
    dataset: str | None = None
    seq_len: int = 256
    micro_batch: int = 4
    steps: int = 4
    rounds: int = 2
    nproc: int = 2
    threads: int | None = 1
    device: str = "cpu"
    levers: tuple[str, ...] = DEFAULT_LEVERS
    peak_tflops: float | None = None  # GPU: when the name is not in GPU_BF16_PEAKS
    gemm_seconds: float = 0.25
    cache_dir: str = "~/.cache/workshop"
    out_dir: str = "out/bench/ceiling"
    timeout_s: float = 1200

    def validate(self) -> None:

        check_choice("device", self.device, DEVICES)
        check_choice("model preset", self.model, PRESETS)
        for name in ("seq_len", "micro_batch", "steps", "rounds", "nproc", "gemm_seconds"):
            check_positive(name, getattr(self, name))
        if self.threads is not None:
            check_positive("threads", self.threads)
        if self.peak_tflops is not None:
            check_positive("peak-tflops", self.peak_tflops)
        if self.steps < 3:
            raise WorkshopError(
                f"steps must be >= 3 (the first, warm-up step is left out of medians), got {self.steps}"
            )
        for n in self.levers:
            check_choice("lever", n, LEVERS)
        if self.dataset is not None:  # its head: a folder, an empty or a binary file fail here
            read_text(self.dataset, "--dataset", "a UTF-8 text file, one sample per line", limit=1 << 16)


def recipe_args(cfg: CeilingConfig) -> TrainArgs:
    """The workbook recipe (bench.WORKBOOK_ENGINE, the one definition) as TrainArgs, at this benchmark's
    size."""

    dataset = cfg.dataset
    if dataset is None:
        dataset = str(build_corpus(Path(cfg.cache_dir).expanduser() / "corpus.txt"))
    head = run_argv(
        model=cfg.model,
        dataset=dataset,
        seq_len=cfg.seq_len,
        steps=cfg.steps,
        cache_dir=cfg.cache_dir,
        output_dir=str(Path(cfg.out_dir) / "recipe"),
    )
    argv = [
        *head,
        *runnable_here(WORKBOOK_ENGINE, cfg.device),
        "--micro-batch",
        str(cfg.micro_batch),
        "--precision",
        "auto",
        "--master-weights",
        "--backend",
        "nccl" if cfg.device == "cuda" else "gloo",
    ]
    if cfg.threads and cfg.device == "cpu":
        argv += ["--threads", str(cfg.threads)]
    return parse_args(argv)


@dataclass
class Plan:
    """Every lever's TrainArgs and environment, or the reason it is skipped, decided before anything runs."""

    recipe: TrainArgs
    precision: str
    runs: dict[str, tuple[TrainArgs, dict, str | None]] = field(default_factory=dict)  # args, env, allocator
    skipped: dict[str, str] = field(default_factory=dict)  # name -> reason


def plan(cfg: CeilingConfig, *, gemm_ratio: float | None = None) -> Plan:

    cfg.validate()
    recipe = recipe_args(cfg)
    precision = "bf16" if cfg.device == "cuda" else hardware.resolve_precision(recipe.precision)[0]
    p = Plan(recipe, precision)
    for name in parse_levers(",".join(cfg.levers)):
        lv = LEVERS[name]
        why = (
            "a CPU-only lever (host threads and allocator of CPU ranks)"
            if lv.cpu_only and cfg.device != "cpu"
            else next(
                filter(
                    None,
                    (
                        requirement(n, device=cfg.device, recipe_precision=precision, gemm_ratio=gemm_ratio)
                        for n in lv.needs
                    ),
                ),
                None,
            )
        )
        if why:
            p.skipped[name] = why
            continue
        args = replace(lever_args(lv, recipe), output_dir=str(Path(cfg.out_dir) / name))
        if (
            name != "recipe"
            and args == replace(recipe, output_dir=args.output_dir)
            and (lv.allocator or WORKBOOK_ALLOCATOR) == WORKBOOK_ALLOCATOR
        ):
            p.skipped[name] = "the recipe already runs this way here"
            continue
        p.runs[name] = (args, *lever_env(lv, cfg.device))
    return p


def lever_precision(args, plan_precision: str) -> str:
    return plan_precision if args.precision == "auto" else args.precision


class Bf16Probe(TypedDict):
    """bf16 against fp32 at one shape, measured where the recipe trains in fp32 (is bf16 emulated here?)."""

    shape: str
    fp32_tflops: float
    bf16_tflops: float
    bf16_over_fp32: float


class CeilingRound(TypedDict):
    """One round's GEMM ceiling at one (tokens, dtype): the mean of the probes before and after its levers."""

    round: int
    tflops: float
    start: dict[str, Any]  # gemm_ceiling()'s result
    end: dict[str, Any]
    drift_pct: float  # end against start: a neighbour's load shows here


class LeverRun(TypedDict):
    """`record()`: one training run of one lever."""

    tokens_per_s: float
    step_time_s: float
    flops_per_token: float
    model_tflops: float
    final_loss: float | None
    steps: int
    step_tokens_per_s: NotRequired[list[float]]  # every step's, the warm-up left out: the run's own spread


class LeverSummary(TypedDict):
    """`summarize_lever()`: a measured lever over its rounds."""

    runs: list[LeverRun]
    precision: str
    tokens_per_s: StatsRecord
    model_tflops: StatsRecord
    ceiling_tflops: StatsRecord
    pct_of_ceiling: StatsRecord  # of the same round's ceiling
    mfu_pct_of_peak: StatsRecord | None  # None: no nominal peak for this precision
    mfu_pct_of_amx_peak: StatsRecord | None
    effect_vs_base: NotRequired[StatsRecord]  # tokens/s over its base's, paired by round
    verdict: NotRequired[str]  # "pays" | "costs" | "within noise"
    verdict_sentence: NotRequired[str]  # report.verdict.compare's sentence: the numbers behind the verdict
    verdict_range: NotRequired[tuple[float, float]]  # the ratio's range the verdict judged (lever / base)
    share: NotRequired[ShareRecord]  # the step's share of the ceiling from every step and probe


class ShareRecord(TypedDict):
    """report.verdict.share of a lever's steps against its ceiling probes (start and end of every round)."""

    pct: float
    low: float
    high: float
    drift_pct: float  # the ceiling's last probe against its first
    clear: bool  # one share can be quoted (the ceiling held within verdict.DRIFT_BOUND_PCT, share <= 100%)
    sentence: str


class LeverResult(TypedDict):
    """One lever in ceiling.json "levers": skipped or failed with a reason, or measured with its numbers."""

    label: str
    about: str
    base: str | None
    status: str  # "measured" | "skipped" | "failed"
    reason: NotRequired[str]  # skipped or failed
    train_args: NotRequired[list[str]]  # measured: the LeverSummary keys too
    env: NotRequired[dict[str, str]]
    allocator: NotRequired[str | None]
    runs: NotRequired[list[LeverRun]]
    precision: NotRequired[str]
    tokens_per_s: NotRequired[StatsRecord]
    model_tflops: NotRequired[StatsRecord]
    ceiling_tflops: NotRequired[StatsRecord]
    pct_of_ceiling: NotRequired[StatsRecord]
    mfu_pct_of_peak: NotRequired[StatsRecord | None]
    mfu_pct_of_amx_peak: NotRequired[StatsRecord | None]
    effect_vs_base: NotRequired[StatsRecord]
    verdict: NotRequired[str]
    verdict_sentence: NotRequired[str]
    verdict_range: NotRequired[tuple[float, float]]
    share: NotRequired[ShareRecord]


class StepTarget(TypedDict):
    target: float
    recipe: float | None  # the recipe's median % of the ceiling
    best_lever: str | None
    best: float | None
    verdict: str


class RatioTarget(TypedDict):
    target: float
    value: float | None
    verdict: str


class Targets(TypedDict):
    step_pct_of_ceiling: StepTarget
    bf16_over_fp32: RatioTarget


class CeilingResult(TypedDict):
    """`run()`'s record: benchmarks/results/ceiling.json (chapter 04 prints it; `save` adds when)."""

    benchmark: str
    device: str
    config: dict[str, Any]  # CeilingConfig's fields
    machine: dict[str, Any]  # machine()
    isa_path: str
    precision: str  # the recipe's, on this machine
    peaks: dict[str, Any]  # device_peaks()
    arch: dict[str, Any]  # Architecture's fields
    recipe: dict[str, Any]  # TrainArgs' fields
    shapes: list[dict[str, Any]]  # Linear's fields
    bf16_probe: Bf16Probe | None
    order: list[str]  # what ran, in order
    ceilings: dict[str, list[CeilingRound]]  # "<tokens>x<dtype>" -> per round
    levers: dict[str, LeverResult]
    wall_s: float
    targets: NotRequired[Targets]  # judged from the rest, added last


def train_once(args: TrainArgs, env: dict, cfg: CeilingConfig, round_: int) -> dict:
    """One torchrun of the entry point; returns its metrics.json."""

    args = replace(args, output_dir=f"{args.output_dir}-r{round_}")
    res = run_torchrun(
        args,
        nproc_per_node=cfg.nproc,
        threads_per_rank=cfg.threads if cfg.device == "cpu" else None,
        env=env,
        progress=False,
        timeout=cfg.timeout_s,
    ).check()
    return res.finished_metrics()


def run(
    cfg: CeilingConfig, *, trainer: Callable = train_once, prober: Callable = gemm_ceiling, echo=print
) -> CeilingResult:
    """Interleaved rounds: per round, the GEMM ceiling at every shape the levers use, then every lever
    once."""

    cfg.validate()
    mach = machine(cfg.device)
    p0 = plan(cfg)
    config = build_config(cfg.model)
    shapes = linear_shapes(config)
    arch = architecture(cfg.model)
    # bf16 at one representative shape, once: the evidence for skipping bf16 where it is emulated
    bf16_probe: Bf16Probe | None = None
    if cfg.device == "cpu" and p0.precision == "fp32":
        gate = [s for s in shapes if s.name == "gate_proj"]
        fp, bf = (
            prober(
                gate,
                tokens=cfg.micro_batch * cfg.seq_len,
                dtype=dtype,
                nproc=1,
                threads=cfg.threads,
                device="cpu",
                min_seconds=cfg.gemm_seconds,
            )
            for dtype in ("fp32", "bf16")
        )
        bf16_probe = {
            "shape": f"{cfg.micro_batch * cfg.seq_len}x{gate[0].inp}x{gate[0].out}",
            "fp32_tflops": fp["tflops"],
            "bf16_tflops": bf["tflops"],
            "bf16_over_fp32": bf["tflops"] / fp["tflops"],
        }
        echo(f"bf16 probe: bf16 GEMM at the gate_proj shape = x{bf16_probe['bf16_over_fp32']:.3g} of fp32")
    pl = plan(cfg, gemm_ratio=bf16_probe["bf16_over_fp32"] if bf16_probe else None)
    for name, why in pl.skipped.items():
        echo(f"skip {name}: {why}")
    names = list(pl.runs)
    keys = {
        n: (a.micro_batch * a.seq_len, lever_precision(a, pl.precision)) for n, (a, _, _) in pl.runs.items()
    }
    peaks = device_peaks(cfg, mach)
    runs: dict[str, list[LeverRun]] = {n: [] for n in names}
    ceilings: dict[str, list[CeilingRound]] = {}
    failed: dict[str, str] = {}
    order: list[str] = []
    t0 = time.time()

    def probe_all(r: int, when: str) -> dict[str, dict]:
        got = {}
        for tokens, dtype in dict.fromkeys(keys.values()):
            key = f"{tokens}x{dtype}"
            order.append(f"ceiling:{key}:{when}#{r}")
            got[key] = prober(
                shapes,
                tokens=tokens,
                dtype=dtype,
                nproc=cfg.nproc,
                threads=cfg.threads if cfg.device == "cpu" else None,
                device=cfg.device,
                min_seconds=cfg.gemm_seconds,
            )
            echo(
                f"[round {r + 1}] GEMM ceiling {key} ({when}): {got[key]['tflops'] * 1e3:.1f} GFLOPS "
                f"({cfg.nproc} ranks)"
            )
        return got

    for r in range(cfg.rounds):
        first = probe_all(r, "start")
        for _round, name in interleave(names, 1):
            args, env, _alloc = pl.runs[name]
            order.append(f"{name}#{r}")
            try:
                m = trainer(args, env, cfg, r)
            except (
                RuntimeError,
                TimeoutError,
            ) as e:  # loud in the output and the JSON, the other levers go on
                failed.setdefault(name, str(e).splitlines()[0][:500])
                echo(f"[round {r + 1}] {name}: FAILED: {failed[name]}")
                continue
            runs[name].append(record(m, args, arch))
            echo(
                f"[round {r + 1}] {name}: {m['tokens_per_s_median']:.0f} tokens/s, "
                f"{m['step_time_s_median']:.2f} s/step"
            )
        last = probe_all(r, "end")
        for key in first:  # the round's ceiling brackets its levers; a neighbour's load shows up as drift_pct
            a, b = first[key]["tflops"], last[key]["tflops"]
            ceilings.setdefault(key, []).append(
                {
                    "round": r,
                    "tflops": (a + b) / 2,
                    "start": first[key],
                    "end": last[key],
                    "drift_pct": round(100 * (b - a) / a, 1),
                }
            )
    levers: dict[str, LeverResult] = {}
    out: CeilingResult = {
        "benchmark": "ceiling",
        "device": cfg.device,
        "config": {**asdict(cfg), "levers": list(cfg.levers)},
        "machine": mach,
        "isa_path": isa_path(mach["isa_flags"] | {"arch": mach["arch"]}, pl.precision)
        if cfg.device == "cpu"
        else f"GPU tensor cores ({pl.precision})",
        "precision": pl.precision,
        "peaks": peaks,
        "arch": asdict(arch),
        "recipe": asdict(pl.recipe),
        "shapes": [asdict(s) for s in shapes],
        "bf16_probe": bf16_probe,
        "order": order,
        "ceilings": ceilings,
        "levers": levers,
        "wall_s": round(time.time() - t0, 1),
    }  # levers: filled below
    for name in parse_levers(",".join(cfg.levers)):
        lv = LEVERS[name]
        if name in pl.skipped:
            levers[name] = {
                "label": lv.label,
                "about": lv.about,
                "base": lv.base,
                "status": "skipped",
                "reason": pl.skipped[name],
            }
            continue
        base_failed = failed.get(lv.base) if lv.base else None
        if name in failed or base_failed is not None:
            levers[name] = {
                "label": lv.label,
                "about": lv.about,
                "base": lv.base,
                "status": "failed",
                "reason": failed.get(name) or f"its base {lv.base} failed: {base_failed}",
            }
            continue
        args, env, allocator = pl.runs[name]
        tokens, dtype = keys[name]
        levers[name] = {
            "label": lv.label,
            "about": lv.about,
            "base": lv.base,
            "status": "measured",
            "train_args": args.to_argv(),
            "env": env,
            "allocator": allocator,
            **summarize_lever(
                runs[name],
                ceilings[f"{tokens}x{dtype}"],
                peaks,
                dtype,
                runs.get(lv.base) if lv.base else None,
                (lv.label, LEVERS[lv.base].label if lv.base else ""),
            ),
        }
    out["targets"] = targets(out)
    return out


def record(m: dict, args: TrainArgs, arch: Architecture) -> LeverRun:
    """One run: useful tokens/s, step time and the model-FLOP rate (6N + attention, bench.flops_per_token)."""
    fpt = flops_per_token(
        m.get("params") or arch.params,
        layers=arch.layers,
        hidden=arch.hidden,
        seq_len=args.seq_len,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
    )
    tps = m["tokens_per_s_median"]
    per_step = steady([s.get("tokens_per_s") for s in m.get("steps", [])])
    return {
        "tokens_per_s": tps,
        "step_time_s": m["step_time_s_median"],
        "flops_per_token": fpt,
        "model_tflops": tps * fpt / 1e12,
        "final_loss": m.get("final_loss"),
        "steps": len(m.get("steps", [])),
        "step_tokens_per_s": per_step or [tps],
    }


def device_peaks(cfg: CeilingConfig, mach: dict) -> dict:
    """The nominal peak of the cores (or GPUs) the ranks use, per precision."""
    if cfg.device == "cuda":
        g = gpu_peak(mach.get("gpu", ""), cfg.peak_tflops)
        return {
            "bf16_tflops": g["bf16_tflops"] * cfg.nproc,
            "fp32_tflops": None,
            "source": g["source"],
            "per_gpu": g,
        }
    p = peaks_for(cfg.nproc * (cfg.threads or 1))
    return {
        k: p[k]
        for k in (
            "cores",
            "clock_ghz",
            "bf16_tflops",
            "bf16_path",
            "fp32_tflops",
            "fp32_path",
            "amx_bf16_tflops",
        )
    }


def summarize_lever(
    recs: list[LeverRun],
    ceils: list[CeilingRound],
    peaks: dict,
    dtype: str,
    base: list[LeverRun] | None,
    labels: tuple[str, str] = ("lever", "base"),
) -> LeverSummary:
    """Medians and spreads over the rounds; % of the SAME round's ceiling; effect paired with the base's
    run."""
    peak = peaks.get(f"{dtype}_tflops")
    out: LeverSummary = {
        "runs": recs,
        "precision": dtype,
        "tokens_per_s": Stats.of([r["tokens_per_s"] for r in recs]).as_dict(),
        "model_tflops": Stats.of([r["model_tflops"] for r in recs]).as_dict(),
        "ceiling_tflops": Stats.of([c["tflops"] for c in ceils]).as_dict(),
        "pct_of_ceiling": Stats.of(
            [100 * r["model_tflops"] / c["tflops"] for r, c in zip(recs, ceils)]
        ).as_dict(),
        "mfu_pct_of_peak": Stats.of(
            [mfu(r["tokens_per_s"], r["flops_per_token"], peak) for r in recs]
        ).as_dict()
        if peak
        else None,
        "mfu_pct_of_amx_peak": Stats.of(
            [mfu(r["tokens_per_s"], r["flops_per_token"], peaks["amx_bf16_tflops"]) for r in recs]
        ).as_dict()
        if peaks.get("amx_bf16_tflops")
        else None,
    }
    probes = [p["tflops"] for c in ceils for p in (c["start"], c["end"])]
    if probes:
        steps = [t * r["flops_per_token"] / 1e12 for r in recs for t in r.get("step_tokens_per_s", [])]
        sh = share(
            steps or [r["model_tflops"] for r in recs],
            probes,
            part_label=_("the step"),
            reference_label=_("GEMM ceiling"),
            unit="TFLOPS",
        )
        out["share"] = {
            "pct": sh.pct,
            "low": sh.low,
            "high": sh.high,
            "drift_pct": sh.drift_pct,
            "clear": sh.clear,
            "sentence": sh.sentence,
        }
    if base is not None:
        eff = paired_ratios([r["tokens_per_s"] for r in recs], [r["tokens_per_s"] for r in base])
        out["effect_vs_base"] = eff.as_dict()
        v = lever_verdict(recs, base, labels)
        out["verdict"] = "within noise" if not v.clear else "pays" if v.winner == labels[0] else "costs"
        out["verdict_sentence"] = v.sentence
        out["verdict_range"] = (v.low, v.high)
    return out


def lever_verdict(
    recs: list[LeverRun], base: list[LeverRun], labels: tuple[str, str] = ("lever", "base")
) -> Comparison:
    """A lever against its base: per round, paired (drift between rounds cancels); from one round, every
    step of each run against the other's (the steps' spread is the noise)."""
    if len(recs) >= 2 and len(recs) == len(base):
        return compare(
            [r["tokens_per_s"] for r in recs],
            [r["tokens_per_s"] for r in base],
            a_label=labels[0],
            b_label=labels[1],
            paired=True,
        )
    return compare(
        [t for r in recs for t in r.get("step_tokens_per_s", [r["tokens_per_s"]])],
        [t for r in base for t in r.get("step_tokens_per_s", [r["tokens_per_s"]])],
        a_label=labels[0],
        b_label=labels[1],
    )


def targets(res: CeilingResult) -> Targets:
    """The issue's targets, judged where they can be: step >= 60% of the ceiling; bf16 >= 2x fp32 with native
    bf16."""
    lv = res["levers"]
    measured = {n: v for n, v in lv.items() if v["status"] == "measured"}
    # only levers in the recipe's precision compete: fp32 on an AMX CPU fills more of fp32's (six times lower)
    # ceiling while running at half the speed, which is no step closer to this machine's ceiling
    same = {n: v for n, v in measured.items() if v.get("precision", res["precision"]) == res["precision"]}
    best = max(same, key=lambda n: same[n]["pct_of_ceiling"]["median"]) if same else None
    v = measured[best]["pct_of_ceiling"]["median"] if best else None
    recipe = measured["recipe"]["pct_of_ceiling"]["median"] if "recipe" in measured else None
    step: StepTarget = {
        "target": TARGET_PCT_OF_CEILING,
        "recipe": recipe,
        "best_lever": best,
        "best": v,
        "verdict": (
            "not measured"
            if v is None
            else "met"
            if v >= TARGET_PCT_OF_CEILING
            else f"missed by {100 * (TARGET_PCT_OF_CEILING - v) / TARGET_PCT_OF_CEILING:.0f}%"
        ),
    }
    ratio: RatioTarget
    if "bf16" in measured:
        r = measured["bf16"]["effect_vs_base"]["median"]
        ratio = {"target": 2.0, "value": r, "verdict": "met" if r >= 2 else "missed"}
    elif "fp32" in measured:
        r = 1 / measured["fp32"]["effect_vs_base"]["median"]
        ratio = {"target": 2.0, "value": r, "verdict": "met" if r >= 2 else "missed"}
    else:
        why = lv["bf16"].get("reason") if "bf16" in lv else None
        why = why or "bf16 lever not run"
        ratio = {"target": 2.0, "value": None, "verdict": f"cannot be judged here: {why}"}
    return {"step_pct_of_ceiling": step, "bf16_over_fp32": ratio}


# ---------------------------------------------------------------- table and figure for chapter 04

CEILING_JSON = RESULTS_DIR / "ceiling.json"


def load(path: str | Path = CEILING_JSON) -> CeilingResult:
    path = Path(path)
    if not path.is_file():
        raise WorkshopError(f"no ceiling result at {path}; run `python -m workshop bench ceiling` first")
    return json.loads(path.read_text())


class CeilingRow(TypedDict):
    """One lever as chapter 04's table shows it (`rows()`); skipped and failed levers have only their note."""

    lever: str
    label: str
    status: str
    ceiling_of: NotRequired[str | None]  # measured: "<precision> ceiling" when not the recipe's precision
    tokens_per_s: float | None
    pct_of_ceiling: float | None
    pct_range: tuple[float, float] | None
    mfu_pct: float | None
    effect: float | None
    effect_range: tuple[float, float] | None
    base: str | None
    verdict: str
    note: str | None


def rows(result: CeilingResult | None = None, path: str | Path = CEILING_JSON) -> list[CeilingRow]:
    """One row per lever: tokens/s, % of this machine's GEMM ceiling, MFU of the nominal peak, effect vs its
    base."""
    res = load(path) if result is None else result
    out: list[CeilingRow] = []
    for name, lv in res["levers"].items():
        if lv["status"] != "measured":
            out.append(
                {
                    "lever": name,
                    "label": lv["label"],
                    "status": lv["status"],
                    "tokens_per_s": None,
                    "pct_of_ceiling": None,
                    "pct_range": None,
                    "mfu_pct": None,
                    "effect": None,
                    "effect_range": None,
                    "base": lv.get("base"),
                    "verdict": "skipped",
                    "note": lv.get("reason"),
                }
            )
            continue
        pct, eff, m = lv["pct_of_ceiling"], lv.get("effect_vs_base"), lv.get("mfu_pct_of_peak")
        # every step against every ceiling probe where the result has them (the whisker a drifting ceiling
        # widens); older results: min-max over the rounds
        sh = lv.get("share")
        lo, hi = (sh["low"], sh["high"]) if sh else (pct["min"], pct["max"])
        # a lever in another precision is measured against that precision's ceiling, not the recipe's
        other = lv.get("precision") and lv["precision"] != res.get("precision")
        out.append(
            {
                "lever": name,
                "label": lv["label"],
                "status": "measured",
                "ceiling_of": f"{lv['precision']} ceiling" if other else None,
                "tokens_per_s": round(lv["tokens_per_s"]["median"], 1),
                "pct_of_ceiling": round(pct["median"], 1),
                "pct_range": (round(min(lo, pct["median"]), 1), round(max(hi, pct["median"]), 1)),
                "mfu_pct": round(m["median"], 1) if m else None,
                "effect": round(eff["median"], 3) if eff else None,
                "effect_range": (
                    tuple(round(x, 3) for x in lv["verdict_range"])  # type: ignore[typeddict-item]
                    if lv.get("verdict_range")
                    else (round(eff["min"], 3), round(eff["max"], 3))
                )
                if eff
                else None,
                "base": lv.get("base"),
                "verdict": lv.get("verdict", "baseline"),
                "note": lv["about"],
            }
        )
    return out


def format_table(table: list[CeilingRow]) -> str:
    """Markdown for the notebook and the README."""
    lines = [
        (
            "| lever | tokens/s | % of GEMM ceiling (min-max) | MFU % of peak | effect vs base (min-max) | "
            "verdict |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for r in table:
        if r["status"] != "measured":
            lines.append(f"| {r['label']} | - | - | - | - | skipped: {r['note']} |")
            continue
        pct_range = r["pct_range"]
        assert pct_range is not None  # rows() gives every measured lever its range
        pct = f"{r['pct_of_ceiling']} ({pct_range[0]}-{pct_range[1]})"
        if r.get("ceiling_of"):
            pct += f" of the {r['ceiling_of']}"
        eff_range = r["effect_range"]  # None exactly when effect is: a lever without a base
        eff = "-" if eff_range is None else f"x{r['effect']} ({eff_range[0]}-{eff_range[1]}) vs {r['base']}"
        lines.append(
            f"| {r['label']} | {r['tokens_per_s']} | {pct} | {r['mfu_pct']} | {eff} | {r['verdict']} |"
        )
    return "\n".join(lines)


def figure(result: CeilingResult | None = None, path: str | Path = IMAGES_DIR / "bench_ceiling.png") -> Path:

    res = load() if result is None else result
    rounds = res["config"].get("rounds", 1)
    return plot_ceiling(
        [r for r in rows(res) if r["status"] == "measured"],
        path,
        effect_label=f"tokens/s vs its base (x, {rounds} paired rounds)"
        if rounds > 1
        else "tokens/s vs its base (x, 1 round: steps vs steps)",
        title=f"{res['machine'].get('gpu') or res['machine']['cpu_model']}, {res['isa_path']}: "
        f"step vs GEMM ceiling ({res['config']['model']}, {res['config']['nproc']} ranks, {rounds} round(s); "
        "whiskers: min-max)",
    )


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:  # one GEMM rank (started by gemm_ceiling)
        print(json.dumps(gemm_child(json.loads(argv[1]))), flush=True)
        return 0
    d = CeilingConfig()
    p = argparse.ArgumentParser(prog="workshop bench ceiling", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=d.model, help="preset")
    p.add_argument(
        "--dataset", default=None, help="text file, one sample per line (default: the paragraph corpus)"
    )
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--micro-batch", type=int, default=d.micro_batch)
    p.add_argument(
        "--steps", type=int, default=d.steps, help="optimizer steps per run (the first is left out)"
    )
    p.add_argument("--rounds", type=int, default=d.rounds, help="interleaved rounds")
    p.add_argument("--nproc", type=int, default=d.nproc, help="ranks (GPUs with --device cuda)")
    p.add_argument(
        "--threads", type=int, default=d.threads, help="threads per CPU rank (torch.set_num_threads)"
    )
    p.add_argument("--device", default=d.device, help=" | ".join(DEVICES) + " (cuda: backend nccl, GPU peak)")
    p.add_argument("--peak-tflops", type=float, default=None, help="GPU bf16 peak when its name is not known")
    p.add_argument(
        "--levers",
        type=comma_list(choices=LEVERS, noun="levers"),
        default=",".join(DEFAULT_LEVERS),
        help="comma-separated, from: " + ", ".join(LEVERS),
    )
    p.add_argument(
        "--gemm-seconds", type=float, default=d.gemm_seconds, help="time per GEMM in the ceiling probe"
    )
    p.add_argument("--cache-dir", default=d.cache_dir)
    p.add_argument("--out-dir", default=d.out_dir)
    p.add_argument("--json-out", default=None, help=f"default: {CEILING_JSON}")
    p.add_argument("--images-dir", default=str(IMAGES_DIR))
    a = p.parse_args(argv)
    try:
        levers = tuple(a.levers)
        cfg = CeilingConfig(
            model=a.model,
            dataset=a.dataset,
            seq_len=a.seq_len,
            micro_batch=a.micro_batch,
            steps=a.steps,
            rounds=a.rounds,
            nproc=a.nproc,
            threads=a.threads if a.device == "cpu" else None,
            device=a.device,
            levers=levers,
            peak_tflops=a.peak_tflops,
            gemm_seconds=a.gemm_seconds,
            cache_dir=a.cache_dir,
            out_dir=a.out_dir,
        )
        cfg.validate()
        check_output(a.json_out or CEILING_JSON, "--json-out")
        for flag, path in (
            ("--out-dir", a.out_dir),
            ("--images-dir", a.images_dir),
            ("--cache-dir", a.cache_dir),
        ):
            check_output(path, flag, folder=True)
        if a.device == "cpu":
            check_fits(cfg.nproc, cfg.threads)
        res = run(cfg)
    except WorkshopError as e:
        return report(e)

    print(f"wrote {save('ceiling', res, RESULTS_DIR, a.json_out or CEILING_JSON)}")
    print(f"figure {figure(res, Path(a.images_dir) / 'bench_ceiling.png')}")
    print(f"{res['machine'].get('gpu') or res['machine']['cpu_model']}: {res['isa_path']}")
    print(format_table(rows(res)))
    t = res["targets"]["step_pct_of_ceiling"]
    print(
        f"step % of GEMM ceiling: recipe {t['recipe']}, best {t['best']} ({t['best_lever']}); target >= "
        f"{t['target']}: {t['verdict']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
