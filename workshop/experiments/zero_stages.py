"""ZeRO stages 1, 2 and 3 measured: the same job once per stage, with the collectives each one issues."""

from __future__ import annotations

from typing import TypedDict

from workshop.lang import _
from workshop.launch.torchrun import run_torchrun


class StageRun(TypedDict):
    """One ZeRO stage's run (chapter 04 prints them as a table)."""

    stage: int
    tokens_per_s: float
    step_time_s: float
    peak_rss_gb_per_rank: list[float]
    final_loss: float


def measure(train_args, stages=(1, 2, 3), *, nproc: int = 2, steps: int = 6) -> list[StageRun]:
    """The same tiny job once per ZeRO stage (workshop.launch.torchrun); returns one run per stage: tokens/s
    and the peak resident memory per rank in GB, measured."""
    from dataclasses import replace

    rows: list[StageRun] = []
    for s in stages:
        print(_("ZeRO-{stage}, {steps} steps ...").format(stage=s, steps=steps), end=" ", flush=True)
        args = replace(
            train_args, zero_stage=s, max_steps=steps, output_dir=f"{train_args.output_dir}-zero{s}"
        )
        m = run_torchrun(args, nproc_per_node=nproc, threads_per_rank=1, progress=False).finished_metrics()
        rows.append(
            {
                "stage": s,
                "tokens_per_s": round(m["tokens_per_s_median"], 1),
                "step_time_s": round(m["step_time_s_median"], 3),
                "peak_rss_gb_per_rank": m["peak_rss_gb_per_rank"],
                "final_loss": m["final_loss"],
            }
        )
        print(_("{speed:.0f} tokens/s").format(speed=rows[-1]["tokens_per_s"]), flush=True)
    return rows
