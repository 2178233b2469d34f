"""The job's knobs, declared once: what a training run is told to do with the model (data, method, sequence,
micro-batch, precision, engine, ZeRO stage and offload, activation checkpointing, checkpoint interval,
learning rate and warm-up, held-out evaluation).

`Knobs` is the base of both halves that name them: `workshop.plan.job.Job` (the planned job) and
`workshop.train.args.TrainArgs` (the training entry point's grammar, one flag per field: each field's
`metadata["help"]` is its --help line). Its defaults are the entry point's, the lessons' small runs (seq 128,
micro-batch 4, lr 1e-3); a planned Job sets every knob it prices. This module imports nothing beyond the
standard library: the training image and the planner both read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def arg(default: Any, help: str | None = None, *, always: bool = False) -> Any:
    """A knob or training argument: its default, its --help text, and `always` to put it on every command
    line (workshop.train.args.TrainArgs.to_argv)."""
    return field(default=default, metadata={"help": help, "always": always})


@dataclass(frozen=True, kw_only=True)
class MemoryKnobs:
    """The knobs that decide what a rank holds, the memory planner's inputs (workshop.plan.memory.MemoryPlan
    holds them). Units: seq_len in tokens, micro_batch in sequences per rank per forward."""

    method: str = arg("full", "full (every weight trains) | lora (low-rank adapters, PEFT)")
    seq_len: int = arg(128)
    micro_batch: int = arg(4, "sequences per rank per forward")
    zero_stage: int = arg(3)
    offload_optimizer: bool = arg(False)
    offload_param: bool = arg(False)
    grad_ckpt: bool = arg(False, "gradient checkpointing")


@dataclass(frozen=True, kw_only=True)
class Knobs(MemoryKnobs):
    """The job's knobs: what a rank holds (MemoryKnobs) and the rest of the recipe. Units: lr per optimizer
    step, save_steps, warmup_steps and eval_steps in optimizer steps."""

    dataset: str = arg(
        "local",
        "local | wikitext | a text file (one sample a line) | a .jsonl file | a hub dataset id (org/name)",
    )
    eval_fraction: float = arg(0.0, "hold out this fraction of the samples for evaluation (0: none)")
    eval_split: str | None = arg(None, "evaluate on the dataset's own split, e.g. validation")
    eval_steps: int = arg(0, "evaluate every N steps (0: only at the end); needs a held-out split")
    # bf16 where the hardware has native bf16 math, else fp32 (hardware.resolve_precision)
    precision: str = arg("auto", "auto (bf16 on GPUs and CPUs with AMX/AVX512_BF16, else fp32) | bf16 | fp32")
    engine: str = arg("deepspeed", "deepspeed | ddp")
    save_steps: int = arg(0, "checkpoint every N steps (0: never)")
    lr: float = arg(1e-3)
    warmup_steps: int = arg(2)
