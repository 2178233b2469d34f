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


def summary(rows: list[StageRun], planned: list[dict] | None = None) -> list[str]:
    """What the stage table shows, as sentences, each only as far as its samples go: memory per rank against
    the planner's states (`planned`: plan.zero.stages rows of the same model) and whether the model is large
    enough for the stages to differ; tokens/s from one run per stage (one round: no verdict); the final
    losses, equal or not."""
    if len(rows) < 2:
        return [_("fewer than two stages ran; nothing to compare")]
    out = []
    peaks = {r["stage"]: max(r["peak_rss_gb_per_rank"]) for r in rows}
    said = ", ".join(f"ZeRO-{s} {p:.3f}" for s, p in peaks.items())
    states = {
        p["stage"]: p["states_gib_per_rank"] * 1.073741824 for p in planned or [] if p["stage"] in peaks
    }
    if len(states) == len(peaks):
        step = max(states.values()) - min(states.values())
        spread = max(peaks.values()) - min(peaks.values())
        out.append(
            _(
                "peak memory per rank (GB): {said}; the planner's model states differ by only {step:.3f} GB "
                "between these stages at this size, and the measured peaks by {spread:.3f} GB: the process "
                "itself (interpreter, libraries, buffers) is most of each peak, so this model is too small "
                "to show what each stage saves; the 8B table above is where the stages differ"
            ).format(said=said, step=step, spread=spread)
            if step < 0.1 * min(peaks.values())
            else _(
                "peak memory per rank (GB): {said}; the planner's model states differ by {step:.3f} GB "
                "between these stages, the measured peaks by {spread:.3f} GB"
            ).format(said=said, step=step, spread=spread)
        )
    else:
        out.append(_("peak memory per rank (GB): {said}").format(said=said))
    out.append(
        _(
            "tokens/s: {speeds}: one run per stage, one after the other, so one round: no verdict on "
            "speed here (the bytes each stage sends are in the tables above)"
        ).format(speeds=", ".join(f"ZeRO-{r['stage']} {r['tokens_per_s']:.0f}" for r in rows))
    )
    losses = {r["stage"]: r["final_loss"] for r in rows}
    same = [s for s in losses if abs(losses[s] - losses[rows[0]["stage"]]) < 1e-4]
    out.append(
        _("final loss: {losses}: {verdict}").format(
            losses=", ".join(f"ZeRO-{s} {v:.4f}" for s, v in losses.items()),
            verdict=_(
                "the same to 4 decimals in every stage: sharding changed where the states live, not "
                "what was computed"
            )
            if len(same) == len(losses)
            else _(
                "not the same in every stage (the same data and steps): sharding also changed the "
                "arithmetic's order or the starting weights, which this table cannot tell apart"
            ),
        )
    )
    return out
