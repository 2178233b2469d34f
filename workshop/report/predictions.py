"""What the planner predicts, said in sentences: the ranked plans (chapter 01), the chosen plan's time and
cost before a TrainJob is submitted (chapter 05), and the model against the original workshop's measured
steps (chapter 06). The sentences about measured runs are in workshop.report.interpret.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workshop.lang import _
from workshop.plan import costcheck
from workshop.plan.options import STATE_BYTES_PER_PARAM
from workshop.tables import hours_text


def cost_plans(plans: Sequence[Any], original: Any | None = None) -> list[str]:
    """Chapter 01's sentences on the ranked plans (workshop.plan.estimate.Plan, cheapest first), computed from
    them: the first plan's hours, USD and bound, a tie, the cheapest CPU plan, and the original workshop's
    plan (`original`) with its seconds of collectives against compute per step."""
    best = plans[0]
    cpu = next((p for p in plans if p.device == "cpu"), None)
    out = [_first_plan(best)]
    ties = [p for p in plans if p.tie]
    if len(ties) > 1:
        out.append(
            _(
                "{n} plans cost within the planner's error of the cheapest (${low:,.0f}-${high:,.0f}): a "
                "tie, ordered by fewer nodes, then lower cost."
            ).format(n=len(ties), low=min(p.usd for p in ties), high=max(p.usd for p in ties))
        )
    if cpu is not None and cpu is not best:
        out.append(
            _(
                "Cheapest CPU plan: {label}, {hours:.3g} h (of which {ckpt:.3g} h checkpoint writes) and "
                "${usd:,.0f} ({ratio:.1f}x the first), {bound}-bound."
            ).format(
                label=cpu.label,
                hours=cpu.hours,
                ckpt=cpu.fixed_s.get("checkpoints", 0.0) / 3600,
                usd=cpu.usd,
                ratio=cpu.usd / best.usd,
                bound=cpu.bound,
            )
        )
        out.append(cpu_bias(cpu))
    if original is not None:
        out.append(_original_plan(original))
    return out


def _first_plan(best: Any) -> str:
    ckpt_s = best.fixed_s.get("checkpoints", 0.0)
    template = (
        _(
            "First: {label} ({ranks} ranks, ZeRO-{zero}, micro-batch {micro_batch} x {grad_accum} "
            "accumulation = {tokens_per_step:,} tokens per step, {steps:,} steps): {hours:.3g} h and "
            "${usd:,.0f} for {tokens:.3g} tokens, of which ${fixed:,.0f} is paid once (start-up, weight "
            "download, init, final save) and {ckpt_hours:.3g} h (${ckpt_usd:,.0f}) are checkpoint writes; "
            "{bound}-bound."
        )
        if ckpt_s > 0
        else _(
            "First: {label} ({ranks} ranks, ZeRO-{zero}, micro-batch {micro_batch} x {grad_accum} "
            "accumulation = {tokens_per_step:,} tokens per step, {steps:,} steps): {hours:.3g} h and "
            "${usd:,.0f} for {tokens:.3g} tokens, of which ${fixed:,.0f} is paid once (start-up, weight "
            "download, init, final save); the run is shorter than one checkpoint interval, so it writes no "
            "checkpoint before the final save; {bound}-bound."
        )
    )
    return template.format(
        label=best.label,
        ranks=best.nodes * best.procs_per_node,
        zero=best.zero_stage,
        micro_batch=best.micro_batch,
        grad_accum=best.grad_accum,
        tokens_per_step=best.tokens_per_step,
        steps=best.steps,
        hours=best.hours,
        usd=best.usd,
        tokens=best.tokens,
        fixed=best.fixed_usd if best.fixed_usd is not None else 0.0,
        ckpt_hours=ckpt_s / 3600,
        ckpt_usd=(best.usd_per_hour or 0.0) * ckpt_s / 3600,
        bound=best.bound,
    )


def _original_plan(original: Any) -> str:
    return _(
        "The original workshop's {label} (gloo, ZeRO-{zero}, micro-batch {micro_batch}): {gb:.1f} GB per "
        "rank per micro-step x {grad_accum} micro-steps over {link:.2f} GB/s = {comm:.0f} s of collectives "
        "against {compute:.1f} s of compute per step: {bound}-bound, {hours:,.0f} h (of which {ckpt:,.0f} h "
        "checkpoint writes) and ${usd:,.0f}. {hint}."
    ).format(
        label=original.label,
        zero=original.zero_stage,
        micro_batch=original.micro_batch,
        gb=original.gb_per_rank_per_step / original.grad_accum,
        grad_accum=original.grad_accum,
        link=original.link_gbytes_per_s,
        comm=original.comm_s,
        compute=original.compute_s,
        bound=original.bound,
        hours=original.hours,
        ckpt=original.fixed_s.get("checkpoints", 0.0) / 3600,
        usd=original.usd,
        hint=original.hint[:1].upper() + original.hint[1:],
    )


def before_submit(plan: Any, steps: int) -> str:
    """Chapter 05's sentence before anything is submitted: the chosen plan's predicted time and cost for the
    job."""
    tokens = steps * plan.micro_batch * plan.seq_len * plan.grad_accum * plan.nodes * plan.procs_per_node
    once = sum(v for k, v in plan.fixed_s.items() if k != "checkpoints")  # start-up, download, init, save
    # the TrainJob's own checkpoints (--save-steps): each writes the states, 14 B/param where the final save
    # writes 2 (bf16 weights), at the same storage rate
    n_ckpt = steps // plan.save_steps if plan.save_steps else 0
    ckpt_s = n_ckpt * plan.fixed_s.get("final save", 0.0) * STATE_BYTES_PER_PARAM / 2
    hours = (steps * plan.step_time_s + once + ckpt_s) / 3600
    usd = f"${hours * plan.usd_per_hour:,.0f}" if plan.usd_per_hour is not None else _("an unknown price")
    return _(
        "Plan: {label}, {ppn} rank(s) per node x {threads} threads, ZeRO-{zero}, micro-batch {micro_batch} x "
        "{seq_len} tokens, accumulation {grad_accum}{ckpt}. Predicted before submitting: {step:.0f} s per "
        "step ({compute:.0f} s compute, {comm:.0f} s collectives, {bound}-bound), so this TrainJob's {steps} "
        "steps ({tokens:,} tokens) plus {once:.0f} s of start-up, download, init and final save and "
        "{ckpt_s:.0f} s for its {n_ckpt} checkpoints take {hours:.1f} h and cost {usd} on demand; the whole "
        "budget of {budget:.3g} tokens: {budget_hours:.1f} h, ${budget_usd:,.0f}. {hint}."
    ).format(
        label=plan.label,
        ppn=plan.procs_per_node,
        threads=plan.threads_per_rank,
        zero=plan.zero_stage,
        micro_batch=plan.micro_batch,
        seq_len=plan.seq_len,
        grad_accum=plan.grad_accum,
        ckpt=_(", checkpointing") if plan.grad_ckpt else "",
        step=plan.step_time_s,
        compute=plan.compute_s,
        comm=plan.comm_s,
        bound=plan.bound,
        steps=steps,
        tokens=tokens,
        once=once,
        ckpt_s=ckpt_s,
        n_ckpt=n_ckpt,
        hours=hours,
        usd=usd,
        budget=plan.tokens,
        budget_hours=plan.hours,
        budget_usd=plan.usd,
        hint=plan.hint[:1].upper() + plan.hint[1:],
    )


# Passes over one corpus beyond which a fine-tune memorizes it rather than learns from it (1-3 is usual).
MANY_EPOCHS = 3


def plan_line(plan: Any) -> str:
    """One sentence for a plan file's Plan (workshop.plan.job.Plan): where it runs, what it trains (the global
    batch, steps and tokens, epochs where the dataset's size is known), its split, and the prediction with
    its checkpoint hours named."""
    job, pl, p = plan.job, plan.placement, plan.prediction
    epochs = ""
    if job.epochs:
        epochs = _("~{epochs:.3g} epochs of {dataset}").format(epochs=job.epochs, dataset=job.dataset)
        if job.epochs > MANY_EPOCHS:  # the cost is real, the fine-tune would not be
            epochs += _(
                ": that many passes over one corpus overfit it (fine-tunes usually make 1-3), so this prices "
                "{tokens:.3g} tokens of a corpus that large, not a sensible run on {dataset}"
            ).format(tokens=job.tokens, dataset=job.dataset)
        epochs = f" ({epochs})"
    return _(
        "{label} ({ppn} rank(s) per node, {capacity}): {model} ({weights} weights), {dataset}, seq {seq}: "
        "global batch {batch:,} tokens x {steps:,} steps = {tokens:,} tokens{epochs}; ZeRO-{zero}, "
        "{precision}, lr {lr:g}, {save}; split {split} (nodes x ranks x "
        "micro-batch x accumulation x seq); predicted {hours:.3g} h, of which {ckpt:.3g} h checkpoint "
        "writes, for {usd}, {bound}-bound."
    ).format(
        label=pl.label,
        ppn=pl.procs_per_node,
        capacity=pl.capacity_type,
        model=job.model,
        weights=job.weights,
        dataset=job.dataset,
        seq=job.seq_len,
        batch=job.global_batch,
        steps=job.steps,
        tokens=job.trained_tokens,
        epochs=epochs,
        zero=job.zero_stage,
        precision=job.precision,
        lr=job.lr,
        save=_("a checkpoint every {n:,} step(s)").format(n=job.save_steps)
        if job.save_steps
        else _("no checkpoint before the final save (one save outlasts the share of this run it may take)"),
        split=plan.summary()["split"],
        hours=p.hours,
        ckpt=p.checkpoint_hours,
        usd=f"${p.usd:,.0f}" if p.usd is not None else _("an unknown price"),
        bound=p.bound,
    )


def planner_instead(kept: Any, first: Any) -> str:
    """Chapter 05's sentence after the prediction: the job it renders (a workshop.plan.job.Plan) against the
    planner's first plan on any node count, each with its hours (checkpoint writes named) and dollars."""

    def usd(p: Any) -> str:
        return f"${p.prediction.usd:,.0f}" if p.prediction.usd is not None else _("an unknown price")

    said = _(
        "This TrainJob is the plan {label}: {hours:.3g} h (of which {ckpt:.3g} h checkpoint writes) and "
        "{usd} for {steps:,} steps of {batch:,} tokens."
    ).format(
        label=kept.placement.label,
        hours=kept.prediction.hours,
        ckpt=kept.prediction.checkpoint_hours,
        usd=usd(kept),
        steps=kept.job.steps,
        batch=kept.job.global_batch,
    )
    if kept.prediction.usd is not None:
        said += " " + cpu_bias(kept.prediction)
    if first.placement.label == kept.placement.label:
        return said + " " + _("It is also the planner's first CPU plan on any node count.")
    return (
        said
        + " "
        + _(
            "The lesson keeps the original workshop's {nodes} nodes; on any node count the planner would run "
            "{label} instead: {hours:.3g} h (of which {ckpt:.3g} h checkpoint writes) and {usd}."
        ).format(
            nodes=kept.placement.nodes,
            label=first.placement.label,
            hours=first.prediction.hours,
            ckpt=first.prediction.checkpoint_hours,
            usd=usd(first),
        )
    )


def original_model(rows) -> list[str]:
    """Per multi-pod row: over or under, and for unrecorded transports which prediction the measurement is
    near. Returns the sentences (translated text, step times in s/step), one per line to print."""
    multi = [r for r in rows if r.pods > 1]
    under = [r.label for r in multi if r.error < -0.05]
    over = [r.label for r in multi if r.error > 0.05]
    out = [
        _("multi-pod rows the model under-predicts (>5% short): {rows}").format(rows=", ".join(under))
        if under
        else _("multi-pod rows the model under-predicts (>5% short): none"),
        _("multi-pod rows it over-predicts (>5% long): {rows}").format(rows=", ".join(over))
        if over
        else _("multi-pod rows it over-predicts (>5% long): none"),
    ]
    by_run: dict[tuple, dict] = {}
    for r in multi:
        if "?" in r.label:
            by_run.setdefault((r.instance, r.pods), {})[r.network] = r
    for (inst, _pods), pair in by_run.items():
        if {"efa", "eni"} <= set(pair):
            m, efa, eni = pair["efa"].measured_s, pair["efa"].predicted_s, pair["eni"].predicted_s
            lo, hi = sorted((efa, eni))
            where = (
                _("between the EFA and ENI predictions")
                if lo <= m <= hi
                else _("above both predictions (slower than even plain ENI predicts)")
                if m > hi
                else _("below both predictions")
            )
            out.append(
                _(
                    "{instance}, transport not recorded: measured {m:.1f} s/step, EFA predicts {efa:.1f}, "
                    "ENI {eni:.1f}: {where}"
                ).format(instance=inst, m=m, efa=efa, eni=eni, where=where)
            )
    return out


def cpu_bias(cpu: Any) -> str:
    """Where the learner reads a CPU price, the one check of a large AMX host beside it: the public 7B full
    fine-tune on a Xeon 8480+ trained slower than this planner predicts, so the hours are a lower bound."""
    xeon = costcheck.amx_rows()[1]
    over = xeon.predicted / xeon.measured
    return _(
        "Read {hours} h as a lower bound: on the one large AMX host checked (a public 7B full "
        "fine-tune on a Xeon 8480+, in the validation table) training ran {over:.1f}x slower than this "
        "planner predicts (its midpoint tokens/s against the one-socket prediction; its row gives the range "
        "over its stated tokens/s and one or two sockets); at that pace this plan takes ~{slow} h and "
        "${slow_usd:,.0f}."
    ).format(
        hours=hours_text(cpu.hours), over=over, slow=hours_text(cpu.hours * over), slow_usd=cpu.usd * over
    )
