"""`workshop bench ceiling`: how close a training step gets to this machine's own matmul ceiling, and the levers.

MFU against a nominal peak mixes two questions: how fast can these cores multiply the model's matrices at
all, and how much of that does a training step use? The ceiling answers the first on the same machine, in the
same run: the GEMM rate at the model's own matmul shapes (a micro-batch of tokens against each projection),
in the step's dtype, with the threads each rank uses. The step's model-FLOP rate per rank over that ceiling
is the share the training recipe reaches; each lever (compile, attention kernel, optimizer, engine, shapes,
threads) is then run interleaved with the base recipe, so the machine's drift cancels in the ratios.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_positive

# A lever is a change to the base recipe's flags (or threads per rank) and a sentence on why it might pay.
LEVERS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "base": ((), 1, "the workbook recipe: DDP, fused AdamW, packed blocks, SDPA attention, 1 thread per rank"),
    "compile": (("--compile",), 1, "torch.compile (Inductor): fuses element-wise ops around the matmuls"),
    "eager_attn": (("--attn", "eager"), 1, "attention as explicit matmul + softmax instead of fused SDPA"),
    "unfused_adamw": (("--optimizer", "adamw_torch"), 1, "AdamW with per-tensor (foreach) updates, not fused"),
    "zero3": (("--engine", "deepspeed", "--zero-stage", "3", "--optimizer", "adamw_torch"), 1,
              "DeepSpeed ZeRO-3 instead of DDP: per-layer all-gathers, sharded states"),
    "micro_batch_8": (("--micro-batch", "8"), 1, "twice the tokens per matmul: more work per call"),
    "threads_2": ((), 2, "2 threads per rank (over-subscribes a 2-core machine with 2 ranks)"),
}
BASE_FLAGS = ("--engine", "ddp", "--micro-batch", "4", "--grad-accum", "1", "--optimizer", "adamw_torch_fused",
              "--packing")


def gemm_shapes(model: str, tokens: int) -> list[tuple[str, int, int, int]]:
    """(name, M, K, N) of every weight matmul in one decoder layer plus the LM head, for `tokens` rows."""
    from workshop.models import build_config

    check_positive("tokens", tokens)
    c = build_config(model)
    head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    h, i, kv = c.hidden_size, c.intermediate_size, c.num_key_value_heads * head
    return [("q_proj", tokens, h, c.num_attention_heads * head), ("k_proj", tokens, h, kv), ("v_proj", tokens, h, kv),
            ("o_proj", tokens, c.num_attention_heads * head, h), ("gate_proj", tokens, h, i),
            ("up_proj", tokens, h, i), ("down_proj", tokens, i, h), ("lm_head", tokens, h, c.vocab_size)]


def gemm_ceiling(model: str, tokens: int, *, dtype: str = "fp32", threads: int = 1, repeats: int = 5,
                 layers: int | None = None) -> dict:
    """Measured TFLOPS of the model's own matmuls (forward shapes, weighted as one step uses them)."""
    import torch

    from workshop.models import build_config

    check_choice("dtype", dtype, ("fp32", "bf16"))
    check_positive("threads", threads)
    dt = torch.float32 if dtype == "fp32" else torch.bfloat16
    n_layers = layers or build_config(model).num_hidden_layers
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        per = []
        for name, m, k, n in gemm_shapes(model, tokens):
            a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
            for _ in range(2):
                a @ b  # warm-up: oneDNN builds its kernel on first use
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                a @ b
                times.append(time.perf_counter() - t0)
            per.append({"name": name, "m": m, "k": k, "n": n, "seconds": statistics.median(times),
                        "count": 1 if name == "lm_head" else n_layers})
    finally:
        torch.set_num_threads(old)
    flops = sum(2 * p["m"] * p["k"] * p["n"] * p["count"] for p in per)
    secs = sum(p["seconds"] * p["count"] for p in per)
    for p in per:
        p["tflops"] = round(2 * p["m"] * p["k"] * p["n"] / p["seconds"] / 1e12, 4)
    return {"dtype": dtype, "threads": threads, "tokens": tokens, "tflops": flops / secs / 1e12, "shapes": per}


@dataclass
class CeilingConfig:
    model: str = "small"
    nproc: int = 2
    seq_len: int = 512
    steps: int = 6
    rounds: int = 2
    levers: tuple[str, ...] = tuple(LEVERS)
    precision: str = "auto"
    out_dir: str = "out/bench-ceiling"

    def validate(self) -> None:
        for name in ("nproc", "seq_len", "steps", "rounds"):
            check_positive(name, getattr(self, name))
        if self.steps < 3:
            raise WorkshopError(f"steps must be >= 3 (the first step is warm-up), got {self.steps}")
        for lever in self.levers:
            check_choice("lever", lever, LEVERS)
        check_choice("precision", self.precision, ("auto", "bf16", "fp32"))


def _variant(lever: str, precision: str):
    from workshop.bench import Variant

    flags, threads, about = LEVERS[lever]
    return Variant(lever, lever, about, BASE_FLAGS + ("--precision", precision) + flags, threads_per_rank=threads,
                   precision=precision)


def run(cfg: CeilingConfig, echo=print, runner=None) -> dict:
    """Ceiling and step for every lever, interleaved (base runs every round); JSON-ready result."""
    from workshop.bench import BenchConfig, flops_per_token, interleave, paired_ratios, peaks_for, run_variant
    from workshop.guard import versions
    from workshop.hardware import resolve_precision
    from workshop.models import architecture

    cfg.validate()
    precision, why = resolve_precision(cfg.precision)
    arch = architecture(cfg.model)
    fpt = flops_per_token(arch["params"], layers=arch["layers"], hidden=arch["hidden"], seq_len=cfg.seq_len,
                          vocab=arch["vocab"], tied=arch["tied_embeddings"])
    bcfg = BenchConfig(model=cfg.model, steps=cfg.steps, rounds=cfg.rounds, nproc=cfg.nproc, seq_len=cfg.seq_len,
                       out_dir=cfg.out_dir)
    runner = runner or run_variant
    levers = ["base", *[x for x in cfg.levers if x != "base"]]
    runs: dict[str, list[dict]] = {x: [] for x in levers}
    ceilings: dict[int, dict] = {}
    for i, (r, lever) in enumerate(interleave(levers, cfg.rounds)):
        v = _variant(lever, precision)
        if v.threads_per_rank not in ceilings:  # the same cores, the same threads, the model's own shapes
            tokens = 4 * cfg.seq_len * (2 if lever == "micro_batch_8" else 1)
            ceilings[v.threads_per_rank] = gemm_ceiling(cfg.model, tokens, dtype=precision, threads=v.threads_per_rank)
        echo(f"[{i + 1}/{len(levers) * cfg.rounds}] round {r + 1}: {lever} ...")
        rec = runner(v, replace(bcfg), r)
        runs[lever].append(rec)
        echo(f"    {rec['tokens_per_s']:.0f} tokens/s")
    rows = []
    base = [x["tokens_per_s"] for x in runs["base"]]
    for lever in levers:
        v = _variant(lever, precision)
        tps = [x["tokens_per_s"] for x in runs[lever]]
        per_rank_tflops = statistics.median(tps) * fpt / cfg.nproc / 1e12
        ceiling = ceilings[v.threads_per_rank]["tflops"]
        ratio = paired_ratios(tps, base)
        rows.append({"lever": lever, "about": LEVERS[lever][2], "tokens_per_s": statistics.median(tps),
                     "tokens_per_s_runs": tps, "step_tflops_per_rank": round(per_rank_tflops, 4),
                     "ceiling_tflops_per_rank": round(ceiling, 4),
                     "pct_of_ceiling": round(100 * per_rank_tflops / ceiling, 1),
                     "vs_base": {"median": ratio.median, "min": ratio.min, "max": ratio.max, "n": ratio.n}})
    peaks = peaks_for(cfg.nproc)
    nominal = peaks["bf16_tflops" if precision == "bf16" else "fp32_tflops"] or None
    for row in rows:
        row["mfu_pct_of_nominal"] = round(100 * row["step_tflops_per_rank"] * cfg.nproc / nominal, 1) if nominal else None
    return {"benchmark": "ceiling", "model": cfg.model, "nproc": cfg.nproc, "seq_len": cfg.seq_len,
            "steps": cfg.steps, "rounds": cfg.rounds, "precision": precision, "precision_why": why,
            "flops_per_token": fpt, "isa_path": peaks["bf16_path" if precision == "bf16" else "fp32_path"],
            "peaks": peaks, "ceilings": {str(k): v for k, v in ceilings.items()}, "rows": rows,
            "env": {"cpu_model": peaks["cpu_model"], "isa_class": peaks["isa_class"], "cpus": peaks["cores"], **versions()},
            "date": time.strftime("%Y-%m-%d")}


def format_rows(result: dict) -> str:
    """The lever table chapter 04 and benchmarks/README.md show."""
    lines = [(f"{result['model']}, {result['nproc']} ranks, seq {result['seq_len']}, {result['precision']} "
             f"({result['isa_path']}), measured on {result['env']['cpu_model']} {result['env']['isa_class']}, "
             f"{result['date']}"),
             (f"{'lever':15s} {'tokens/s':>9s} {'x base':>13s} {'step TFLOPS/rank':>16s} {'ceiling':>8s} "
             f"{'% ceiling':>9s} {'MFU %':>6s}")]
    for r in result["rows"]:
        vb = r["vs_base"]
        lines.append(f"{r['lever']:15s} {r['tokens_per_s']:9.0f} {vb['median']:5.2f} ({vb['min']:.2f}-{vb['max']:.2f})"
                     f" {r['step_tflops_per_rank']:16.4f} {r['ceiling_tflops_per_rank']:8.4f} "
                     f"{r['pct_of_ceiling']:9.1f} {r['mfu_pct_of_nominal'] if r['mfu_pct_of_nominal'] is not None else '-':>6}")
    return "\n".join(lines)


def save(result: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path
