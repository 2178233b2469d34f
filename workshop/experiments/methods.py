"""Full fine-tuning beside LoRA, the same job both ways: memory per rank (measured and planned), useful
tokens/s and the held-out loss, one run each (chapter 04).
"""

from __future__ import annotations

from dataclasses import replace

from workshop.lang import _
from workshop.launch.torchrun import run_torchrun
from workshop.plan.memory import LIVE_BYTES_ENV, GiB, plan_memory
from workshop.train.args import TrainArgs

METHODS = ("full", "lora")


def compare(
    args: TrainArgs,
    *,
    nproc: int,
    threads_per_rank: int = 1,
    steps: int = 6,
    lora_lr: float = 1e-2,
    eval_fraction: float = 0.02,
) -> list[dict]:
    """One run per method of `args`' job on `nproc` ranks, `steps` optimizer steps, evaluated at the end on
    the same held-out `eval_fraction`; LoRA with `lora_lr` (adapters start at zero and need a larger step).
    One row per method: trainable parameters, peak memory per rank (measured, and the planner's), median
    tokens/s, the final held-out loss and (`log`) every step's record."""
    rows = []
    for method in METHODS:
        run = replace(
            args,
            method=method,
            lr=lora_lr if method == "lora" else args.lr,
            max_steps=steps,
            eval_fraction=eval_fraction,
            eval_steps=max(1, steps // 3),  # a few held-out points on the way
            save_steps=0,
            save_model=False,
            output_dir=f"{args.output_dir}-{method}",
        )
        # measured as the planner counts, live bytes: glibc returns each freed buffer at once
        m = run_torchrun(
            run, nproc_per_node=nproc, threads_per_rank=threads_per_rank, progress=False, env=LIVE_BYTES_ENV
        ).check()
        metrics = m.finished_metrics()
        planned = plan_memory(
            args.model,
            world_size=nproc,
            zero_stage=run.zero_stage,
            micro_batch=run.micro_batch,
            seq_len=run.seq_len,
            dtype=metrics["args"]["precision"],
            method=method,
        )
        rows.append(
            {
                "method": method,
                "trainable_params": metrics["trainable_params"],
                "params": metrics["params"],
                "peak_gib_per_rank": round(max(metrics["peak_rss_gb_per_rank"]), 3),
                "planned_gib_per_rank": round(planned.total / GiB, 3),
                "tokens_per_s": metrics["tokens_per_s_median"],
                "held_out_loss": metrics["final_eval_loss"],
                "steps": steps,
                "log": metrics["steps"],
            }
        )
    return rows


TABLE = [
    "method",
    "trainable_params",
    "peak_gib_per_rank",
    "planned_gib_per_rank",
    "tokens_per_s",
    "held_out_loss",
]


def summary(rows: list[dict]) -> str:
    """What one run of each shows, and no more: the memory difference beside the planner's, the speed and
    loss as measured once each."""
    full, lora = ({r["method"]: r for r in rows}[k] for k in METHODS)
    saved = full["peak_gib_per_rank"] - lora["peak_gib_per_rank"]
    planned = full["planned_gib_per_rank"] - lora["planned_gib_per_rank"]
    live = _(
        "Both runs set MALLOC_MMAP_THRESHOLD_={bytes}: glibc hands each freed buffer back at once, so the "
        "peaks count live bytes, as the planner does."
    ).format(bytes=LIVE_BYTES_ENV["MALLOC_MMAP_THRESHOLD_"])
    said = _(
        "LoRA trained {share:.1%} of the parameters and peaked at {saved:.3f} GiB less per rank than full "
        "fine-tuning (the planner predicted {planned:.3f} GiB less). Its tokens/s was {speed:.2f}x and its "
        "held-out loss {lora_loss} against {full_loss}, after {steps} steps, one run each: a single sample "
        "of speed on a shared machine, and from random weights, where full fine-tuning has every weight to "
        "learn with; on a pretrained model the loss comparison is the one that matters."
    ).format(
        share=lora["trainable_params"] / lora["params"],
        saved=saved,
        planned=planned,
        speed=lora["tokens_per_s"] / full["tokens_per_s"],
        lora_loss=lora["held_out_loss"],
        full_loss=full["held_out_loss"],
        steps=lora["steps"],
    )
    return f"{said} {live}"
