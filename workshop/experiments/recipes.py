"""The recipes the benchmarks compare: the original workshop's, and the workbook's (one definition each)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from workshop.lang import N_
from workshop.plan import hardware

# The original workshop's DeepSpeed file (chapter 000's cpu-ds.json) beyond stage and offload, reproduced as
# it is.
ORIGINAL_ZERO_EXTRA = {
    "overlap_comm": True,
    "stage3_max_live_parameters": 1e9,
    "stage3_prefetch_bucket_size": 5e8,
    "stage3_param_persistence_threshold": 1e6,
}


ORIGINAL_MIN_CHARS = 11  # the original workshop drops lines of <= 10 characters


@dataclass(frozen=True)
class Variant:
    """One training recipe: the entry point's flags (shared ones come from BenchConfig) and threads per
    rank."""

    name: str
    label: str
    about: str
    argv: tuple[str, ...]
    threads_per_rank: int = 1
    precision: str = "bf16"
    packing: bool = True
    allocator: str = "system"  # launch.ALLOCATORS


ORIGINAL_ENGINE = (
    "--zero-stage",
    "3",
    "--offload-optimizer",
    "--offload-param",
    "--micro-batch",
    "1",
    "--grad-accum",
    "4",
    "--precision",
    "bf16",
    "--extra-ds",
    json.dumps(ORIGINAL_ZERO_EXTRA),
)


# The workbook's recipe for a model that fits every rank (benchmarks/README.md has what each part is worth):
# DDP with the gradient all-reduce in shared memory on one host (--allreduce auto, the default), torch.compile
# with the attention as plain matmuls for Inductor to fuse, the fused AdamW (compiled, with master weights),
# and a caching allocator in every rank.
WORKBOOK_ENGINE = (
    "--engine",
    "ddp",
    "--micro-batch",
    "4",
    "--grad-accum",
    "1",
    "--optimizer",
    "adamw_torch_fused",
    "--compile",
    "--attn-implementation",
    "eager",
)


WORKBOOK_ALLOCATOR = "auto"  # tcmalloc where installed (launch.allocator_env)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant(
            "original",
            N_("original workshop's recipe"),
            "HF Trainer + ZeRO-3, offload_param + offload_optimizer to CPU, bf16, one line "
            "per sample padded to 512, lines <= 10 chars dropped, micro-batch 1, GA 4",
            ORIGINAL_ENGINE + ("--no-packing", "--min-chars", str(ORIGINAL_MIN_CHARS)),
            packing=False,
        ),
        Variant(
            "original_engine_packed",
            N_("original workshop's engine, packed"),
            "the original workshop's ZeRO-3 + offload engine fed packed 512-token "
            "blocks (separates engine tuning from packing)",
            ORIGINAL_ENGINE + ("--packing",),
        ),
        Variant(
            "workbook",
            N_("workbook recipe"),
            "packed 512-token blocks, DDP (the model fits each rank), 1 thread per "
            "rank, bf16 weights with fp32 masters, torch.compile, the compiled AdamW step, shared-memory "
            "all-reduce, tcmalloc",
            WORKBOOK_ENGINE + ("--precision", "bf16", "--master-weights", "--packing"),
            allocator=WORKBOOK_ALLOCATOR,
        ),
        Variant(
            "workbook_fp32",
            N_("workbook recipe, fp32"),
            "the workbook recipe in fp32",
            WORKBOOK_ENGINE + ("--precision", "fp32", "--packing"),
            precision="fp32",
            allocator=WORKBOOK_ALLOCATOR,
        ),
    ]
}


def run_argv(
    *, model: str, dataset: str, seq_len: int, steps: int, cache_dir: str, output_dir: str
) -> list[str]:
    """The entry point's arguments every benchmark run shares: what it trains, for how long, where; warm-up
    off so that every step after the first counts."""
    return [
        "--model",
        model,
        "--dataset",
        dataset,
        "--seq-len",
        str(seq_len),
        "--max-steps",
        str(steps),
        "--cache-dir",
        cache_dir,
        "--output-dir",
        output_dir,
        "--warmup-steps",
        "0",
    ]


def runnable_here(argv, device: str = "cpu") -> list[str]:
    """An engine's arguments as this host runs them. Without a C++ compiler a compiled CPU recipe runs eager
    (Inductor builds its CPU kernels with one) with SDPA, eager's best attention; on a GPU the attention is
    SDPA, compiled or not (its flash kernels are a GPU's best)."""

    argv = list(argv)
    uncompiled = device == "cpu" and "--compile" in argv and not hardware.has_cxx_compiler()
    if uncompiled:
        argv.remove("--compile")
    if (uncompiled or device != "cpu") and "--attn-implementation" in argv:
        argv[argv.index("--attn-implementation") + 1] = "sdpa"
    return argv
