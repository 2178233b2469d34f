"""Choosing among estimates: the jobs tried on each cluster (every split of the global batch that fits in
memory), the cheapest per cluster, ties within the planner's error, the Pareto front, and the one change that
helps a plan most (its hint).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from workshop.errors import WorkshopError
from workshop.lang import _
from workshop.plan.catalog import InstanceRow
from workshop.plan.estimate import Candidate, Plan, estimate, job_of, memory_options, zero3_for
from workshop.plan.fit import fit_instance, pod_cores
from workshop.plan.job import ranked_job
from workshop.plan.memory import DEFAULT_ACTIVATIONS, STACK_ACTIVATIONS
from workshop.plan.models import Architecture
from workshop.plan.nodes import node_for
from workshop.plan.options import PLANNER_ERROR, Options, split_batch
from workshop.plan.zero3 import Zero3Calls
from workshop.tables import hours_text


def _offloads(row: InstanceRow, stage: int, allow: bool) -> list[tuple[bool, bool]]:
    """GPU offload variants, only when asked: the estimator has no term for offload's host work (chapter 06's
    unfitted rows miss the original offloaded runs by 58-94%), so an offloaded plan would rank too well."""
    if not row.gpus or stage == 0 or not allow:
        return [(False, False)]
    return [(False, False), (True, False)] + ([(True, True)] if stage == 3 else [])


def _fits(row: InstanceRow, job: Candidate, opts: Options) -> bool:
    """Does the job's memory plan fit `row` with the caller's headroom?"""
    got, _why = fit_instance(
        row,
        model=opts.model,
        nodes=job.nodes,
        procs_per_node=job.procs_per_node,
        headroom=opts.headroom,
        plan_kw=memory_options(job, activations_of(row, opts)),
    )
    return got is not None


def activations_of(row: InstanceRow, opts: Options) -> str:
    """The activation model of the stack a plan on `row` runs: the GPU stack ranked, else the workbook's."""
    return STACK_ACTIVATIONS[opts.stack] if row.gpus else DEFAULT_ACTIVATIONS


def job_groups(row: InstanceRow, nodes: int, opts: Options) -> Iterable[list[Candidate]]:
    """Every job on `nodes` x `row` that trains the global batch, grouped by all but the micro-batch
    (ascending)."""
    ppn = opts.procs_per_node or (row.gpus if row.gpus else 1)
    world = nodes * ppn
    splits = split_batch(opts.global_batch, opts.seq_len, world, opts.micro_batches)
    job = ranked_job(opts.model, opts.tokens, opts.seq_len, opts.global_batch, opts.method)
    for stage in opts.zero_stages if world > 1 else (0,):
        for off_opt, off_par in _offloads(row, stage, opts.offload):
            for ckpt in opts.grad_ckpts:
                yield [
                    Candidate(
                        replace(
                            job,
                            zero_stage=stage,
                            micro_batch=mb,
                            grad_ckpt=ckpt,
                            offload_optimizer=off_opt,
                            offload_param=off_par,
                        ),  # fmt: skip
                        nodes,
                        ppn,
                        eval_share=opts.eval_share,
                    )
                    for mb, _ga in splits
                ]


def best_for(row: InstanceRow, nodes: int, opts: Options, arch: Architecture) -> Plan | None:
    """The cheapest (then fastest) job on `nodes` x `row` that fits in memory; None if none fits."""
    try:
        node = node_for(row, opts)
    except WorkshopError:
        return None
    best: Plan | None = None
    for group in job_groups(row, nodes, opts):
        for job in group:
            if job.procs_per_node > node.max_ranks or not _fits(row, job, opts):
                break  # a larger micro-batch needs more memory still
            plan = estimate(node, job, arch, opts.tokens, calls=_calls(opts.model, job), fixed=opts.fixed)
            if best is None or plan_key(plan) < plan_key(best):
                best = plan
    return best


def _calls(model: str, job: Candidate) -> Zero3Calls | None:
    return zero3_for(model, job.grad_accum, job.grad_ckpt) if job.zero_stage == 3 and job.world > 1 else None


def plan_key(p: Plan) -> tuple[float, float]:
    return (p.usd if p.usd is not None else math.inf, p.hours)


def mark_pareto(plans: list[Plan]) -> None:
    """A plan is on the front when no other plan is both cheaper and faster."""
    for p in plans:
        p.pareto = p.usd is not None and not any(
            q is not p
            and q.usd is not None
            and q.usd <= p.usd
            and q.hours <= p.hours
            and (q.usd < p.usd or q.hours < p.hours)
            for q in plans
        )


def mark_ties(plans: list[Plan], error: float = PLANNER_ERROR) -> list[Plan]:
    """Plans within the planner's error of the cheapest are ties, ordered the way a learner chooses: fewer
    nodes, then lower cost (then less time); the rest follow, cheapest first. `plans` must be sorted by
    cost."""
    priced = [p for p in plans if p.usd is not None]
    if not priced:
        return plans
    best = priced[0].usd or 0.0
    for p in priced:
        p.tie = (p.usd or math.inf) <= best * (1 + error)
    ties = sorted((p for p in plans if p.tie), key=lambda p: (p.nodes, p.usd or 0.0, p.hours))
    return ties + [p for p in plans if not p.tie]


def dollars(usd: float | None) -> str:
    return f"${usd:,.0f}" if usd is not None else "an unknown price"


def filter_plans(plans: list[Plan], opts: Options) -> list[Plan]:
    """Keep the plans within --max-hours and --budget; none left is an error naming the fastest and
    cheapest."""
    kept = [
        p
        for p in plans
        if (opts.max_hours is None or p.hours <= opts.max_hours)
        and (opts.budget is None or (p.usd or math.inf) <= opts.budget)
    ]
    if not kept:
        fastest = min(plans, key=lambda p: p.hours)
        cheapest = plans[0]
        limits = " and ".join(
            f"--{flag} {value:g}"
            for flag, value in (("max-hours", opts.max_hours), ("budget", opts.budget))
            if value is not None
        )
        raise WorkshopError(
            f"nothing fits {limits}: the fastest plan "
            f"({fastest.label}) takes {fastest.hours:.3g} h for {dollars(fastest.usd)}, the cheapest "
            f"({cheapest.label}) {cheapest.hours:.3g} h for {dollars(cheapest.usd)}"
        )
    return kept


def _variant(plan: Plan, opts: Options, arch: Architecture, row: InstanceRow, **change) -> Plan | None:
    """The plan with one change, re-estimated with the same fixed costs; None if it does not fit or cannot
    train the global batch."""
    job = job_of(plan)
    node_opts = replace(opts, **{k: change.pop(k) for k in ("placement_group", "ena_express") if k in change})
    try:
        job = job.with_changes(**change)  # the same global batch: a hint never changes the fine-tune
    except WorkshopError:
        return None
    if job.procs_per_node > (row.gpus or pod_cores(row)) or not _fits(row, job, node_opts):
        return None
    return estimate(
        node_for(row, node_opts), job, arch, opts.tokens, calls=_calls(opts.model, job), fixed=opts.fixed
    )


def _allowed(p: Plan, opts: Options) -> bool:
    """Inside every constraint the caller set (deadline, budget; the instance type is the plan's own)."""
    return (opts.max_hours is None or p.hours <= opts.max_hours) and (
        opts.budget is None or (p.usd is not None and p.usd <= opts.budget)
    )


def _candidates(
    plan: Plan, opts: Options, arch: Architecture, row: InstanceRow
) -> list[tuple[str, Plan | None]]:
    out: list[tuple[str, Plan | None]] = []
    if plan.nodes > 1 and plan.nodes // 2 in opts.nodes:  # only node counts the caller allows
        fewer = plan.nodes // 2
        out.append(
            (
                _("{n} x {instance} (half the nodes)").format(n=fewer, instance=row.instance_type),
                best_for(row, fewer, opts, arch),
            )
        )
    if plan.nodes * 2 in opts.nodes:
        more = plan.nodes * 2
        out.append(
            (
                _("{n} x {instance} (twice the nodes)").format(n=more, instance=row.instance_type),
                best_for(row, more, opts, arch),
            )
        )
    if plan.grad_accum % 2 == 0:
        out.append(
            (
                _("micro-batch {mb}, {ga} accumulation steps (same global batch)").format(
                    mb=plan.micro_batch * 2, ga=plan.grad_accum // 2
                ),
                _variant(
                    plan, opts, arch, row, micro_batch=plan.micro_batch * 2, grad_accum=plan.grad_accum // 2
                ),
            )
        )
    if plan.device == "cpu" and plan.nodes > 1 and not opts.ena_express:
        out.append(
            (_("ENA Express (25 Gbps per TCP flow)"), _variant(plan, opts, arch, row, ena_express=True))
        )
    return out


def hint(plan: Plan, opts: Options, arch: Architecture, rows: list[InstanceRow]) -> str:
    """The one change that helps this plan most, re-estimated: offered only when it is cheaper or faster
    and inside the caller's deadline and budget, with the trade stated (in the learner's language)."""
    row = next(r for r in rows if r.instance_type == plan.instance_type)
    if plan.usd is None:
        return _("{bound}-bound; no price known: --price {instance}=USD ranks it").format(
            bound=plan.bound, instance=plan.instance_type
        )
    best: tuple[str, Plan] | None = None
    for label, other in _candidates(plan, opts, arch, row):
        if other is None or other.usd is None or not _allowed(other, opts):
            continue
        if not (other.usd < plan.usd * 0.97 or other.hours < plan.hours * 0.97):
            continue  # not better in cost or time by more than noise
        if best is None or (other.usd, other.hours) < (best[1].usd or math.inf, best[1].hours):
            best = (label, other)
    if best is None:
        return _("{bound}-bound; no single change is cheaper or faster").format(bound=plan.bound)
    label, other = best
    return _(
        "{bound}-bound; {change}: {hours} h for ${usd:,.0f} instead of {old_hours} h for ${old_usd:,.0f}"
    ).format(
        bound=plan.bound,
        change=label,
        hours=hours_text(other.hours),
        usd=other.usd,
        old_hours=hours_text(plan.hours),
        old_usd=plan.usd,
    )
