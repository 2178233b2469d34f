"""How long and how much, ranked: the best plan per (instance type, node count) that fits, one named cluster's
plan, the answer at other token budgets, and what a plan becomes (its pod sizes, its TrainJob's settings, the
NodePool's instance types). The estimate itself is workshop.plan.estimate; the options, workshop.plan.options.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from workshop.errors import WorkshopError, check_positive
from workshop.lang import _
from workshop.plan.catalog import InstanceRow, instance_info, list_instances
from workshop.plan.estimate import MEMORY_STACK, Plan, memory_options, run_costs
from workshop.plan.fit import Recommendation, allocatable, recommend_instance
from workshop.plan.memory import HEADROOM
from workshop.plan.models import architecture
from workshop.plan.nodes import node_for
from workshop.plan.options import Options, batch_reason, check_range, split_batch, validate
from workshop.plan.ranking import best_for, filter_plans, hint, mark_pareto, mark_ties, plan_key
from workshop.tables import hours_text


def rank(opts: Options) -> list[Plan]:
    """Best plan per (instance type, node count) that fits, cheapest first with ties ordered by fewer nodes
    then lower cost, Pareto front marked, hinted: a list of Plans (step seconds by term, tokens/s, hours,
    USD, USD per million tokens)."""
    validate(opts)
    arch = architecture(opts.model)
    rows, _source = list_instances(list(opts.families), source=opts.source)
    rows = [r for r in rows if not r.bare_metal]  # a metal size is its 48xlarge/24xlarge twin's hardware
    if not any(r.gpus or (r.amx and r.clock_ghz) for r in rows):  # no type the estimator models: say why now
        raise WorkshopError(_nothing_fits(rows, opts))
    plans = [p for r in rows for n in opts.nodes if (p := best_for(r, n, opts, arch)) is not None]
    if not plans:
        raise WorkshopError(_nothing_fits(rows, opts))
    plans.sort(key=plan_key)
    mark_pareto(plans)
    kept = mark_ties(filter_plans(plans, opts))
    for p in kept[:20]:
        p.hint = hint(p, opts, arch, rows)
    return kept


def _nothing_fits(rows: list[InstanceRow], opts: Options) -> str:
    """Why no plan came out: no data sheet or rate, the global batch, or memory."""
    where = f"{opts.model} on {', '.join(opts.families)} x {list(opts.nodes)} node(s)"
    if not rows:
        return f"nothing fits: the catalog lists no instance type for {', '.join(opts.families)}"
    why = []
    for r in rows[:3]:
        try:
            node_for(r, opts)
        except WorkshopError as exc:
            why.append(str(exc))
    if len(why) == min(3, len(rows)):
        return f"no plan for {where}: {why[0]}"
    ppn = opts.procs_per_node or (rows[0].gpus or 1)
    if all(not split_batch(opts.global_batch, opts.seq_len, n * ppn, opts.micro_batches) for n in opts.nodes):
        return f"no plan for {where}: {batch_reason(opts, min(opts.nodes) * ppn)}"
    return f"nothing fits in memory: {where} ({MEMORY_STACK}, +{opts.headroom:.0%} headroom)"


def at_budget(plans: Sequence[Plan], tokens: float, opts: Options) -> list[Plan]:
    """The same jobs re-costed for another token budget (steps, checkpoints and storage scale; start-up,
    download, init and the final save do not), re-ranked with ties: how the answer moves with the budget."""
    check_range("tokens", tokens, 0, 1e13, low_open=True)
    arch = architecture(opts.model)
    out = []
    for p in plans:
        steps = math.ceil(tokens / p.tokens_per_step)
        train_s = steps * p.step_time_s
        costs = run_costs(p.usd_per_hour, arch, tokens, train_s, opts.fixed)
        out.append(
            replace(
                p,
                job=p.job.with_changes(tokens=float(tokens)),
                tokens=tokens,
                steps=steps,
                train_hours=train_s / 3600,
                **costs,
                tie=False,
                hint="",
            )  # fmt: skip
        )
    out.sort(key=plan_key)
    return mark_ties(out)


def budget_lines(plans: Sequence[Plan], budgets: Sequence[float], opts: Options) -> list[str]:
    """One sentence per token budget (tokens): the first plan, its hours and USD, and the share of the USD
    paid once (start-up, download, init, final save)."""
    lines = []
    for tokens in budgets:
        first = at_budget(plans, tokens, opts)[0]
        share = (first.fixed_usd or 0.0) / first.usd if first.usd else 0.0
        lines.append(
            _(
                "{tokens:.0e} tokens ({steps:,} steps): {label}, {hours:.3g} h (of which {ckpt:.3g} h "
                "checkpoint writes), ${usd:,.0f}, of which {share:.0%} is paid once (start-up, download, "
                "init, final save)"
            ).format(
                tokens=tokens,
                steps=first.steps,
                label=first.label,
                hours=first.hours,
                ckpt=first.fixed_s.get("checkpoints", 0.0) / 3600,
                usd=first.usd or 0.0,
                share=share,
            )
        )
    return lines


def evaluate(instance_type: str, nodes: int, opts: Options) -> Plan:
    """One instance type on `nodes` nodes: its best job as a Plan (seconds per step by term, tokens/s, hours,
    USD), hinted; a WorkshopError saying why not, when none fits."""
    validate(opts)
    check_positive("nodes", nodes)
    arch = architecture(opts.model)
    row = instance_info(instance_type, source=opts.source)
    node = node_for(row, opts)  # an instance the estimator cannot model is an error here, not "nothing fits"
    ppn = (opts.procs_per_node or node.max_ranks) if row.gpus else (opts.procs_per_node or 1)
    if ppn > node.max_ranks:
        unit = "GPUs" if row.gpus else "cores"
        raise WorkshopError(
            f"--procs-per-node {ppn}: {instance_type} has {node.max_ranks} {unit} "
            "(one rank per GPU or core at most)"
        )
    if not split_batch(opts.global_batch, opts.seq_len, nodes * ppn, opts.micro_batches):
        raise WorkshopError(f"no plan on {nodes} x {instance_type}: {batch_reason(opts, nodes * ppn)}")
    plan = best_for(row, nodes, opts, arch)
    if plan is None:
        raise WorkshopError(
            f"nothing fits in memory: {opts.model} on {nodes} x {instance_type} ({MEMORY_STACK}, "
            f"+{opts.headroom:.0%} headroom)"
        )
    plan.hint = hint(plan, opts, arch, [row])
    return plan


def recommendation(
    plan: Plan, model: str, *, headroom: float = HEADROOM, source: str | None = None
) -> Recommendation:
    """Pod requests (cpu cores, memory in Gi), /dev/shm (Gi) and threads per rank for the plan's own instance
    type, as a Recommendation (chapter 05 renders its TrainJob from it)."""
    return recommend_instance(
        model,
        plan.instance_type,
        nodes=plan.nodes,
        procs_per_node=plan.procs_per_node,
        plan_kw=memory_options(plan),
        headroom=headroom,
        source=source,
    )


def within_margin(plans: Sequence[Plan], margin: float = 0.25) -> list[Plan]:
    """The first plan (the pick, chapter 05's job) and the plans costing at most (1 + margin) x the
    cheapest USD (margin 0.25 = 25 %): what chapter 02's NodePool may admit."""
    check_positive("margin", margin, allow_zero=True)
    priced = [p for p in plans if p.usd is not None]
    if not priced:
        raise WorkshopError("no priced plan to take a margin from")
    best = min(p.usd for p in priced if p.usd is not None)
    return [p for p in priced if p is plans[0] or (p.usd is not None and p.usd <= best * (1 + margin))]


def pool_choice(
    plans: Sequence[Plan], rec: Recommendation | None = None, *, source: str | None = None
) -> dict[str, Any]:
    """What karpenter.pool_from_recommendation reads, as a dict: the instance types that can host the pod
    chapter 05 renders (rec: its requests; every plan's type if None), exactly, and the most nodes any plan
    needs."""
    types = sorted({p.instance_type for p in plans})
    if rec is not None:
        cpu = float(rec.cpu_request)
        mem = float(rec.memory_request.removesuffix("Gi"))
        hosts = []
        for t in types:
            gib, vcpus = allocatable(instance_info(t, source=source))
            if gib >= mem and vcpus >= cpu:
                hosts.append(t)
        if rec.instance_type not in hosts:
            hosts.append(rec.instance_type)
        types = sorted(hosts)
    nodes = max(p.nodes for p in plans if p.instance_type in types)
    return {"instance_types": types, "instance_type": types[0], "nodes": nodes, "exact": True}


def format_table(plans: list[Plan], top: int | None = None) -> str:
    """The ranking as text: tokens/s, seconds per step, hours and of them the checkpoint writes' (save h),
    $/h (o = overridden price), the once-per-run dollars (start-up, download, init, final save), the
    checkpoint writes' dollars and the rest (steps, storage: they grow with the tokens), USD; * = Pareto
    front, = a tie with the best."""
    head = (
        f"{'#':>2} {'plan':<22} {'ranks':>5} {'ZeRO':>4} {'mb':>3} {'GA':>3} {'ckpt':>4} {'tok/s':>9} "
        f"{'step s':>7} {'bound':<8} {'hours':>7} {'save h':>7} {'$/h':>8} {'fixed $':>8} {'save $':>7} "
        f"{'tokens $':>8} {'USD':>8} P ="
    )
    lines = [head, "-" * len(head)]
    for i, p in enumerate(plans[:top] if top else plans, 1):
        mark = "o" if p.price_kind == "override" else " "
        ckpt_h = p.fixed_s.get("checkpoints", 0.0) / 3600
        if p.usd is not None and p.usd_per_hour is not None and p.fixed_usd is not None:
            ckpt_usd = p.usd_per_hour * ckpt_h
            steps_usd = p.usd - p.fixed_usd - ckpt_usd
            money = (
                f"{p.usd_per_hour:>7,.2f}{mark} {p.fixed_usd:>8,.0f} {ckpt_usd:>7,.0f} {steps_usd:>8,.0f} "
                f"{p.usd:>8,.0f}"
            )
        else:
            money = f"{'?':>8} {'?':>8} {'?':>7} {'?':>8} {'?':>8}"
        lines.append(
            f"{i:>2} {p.label:<22} {p.nodes * p.procs_per_node:>5} {p.zero_stage:>4} {p.micro_batch:>3} "
            f"{p.grad_accum:>3} {'yes' if p.grad_ckpt else 'no':>4} {p.tokens_per_s:>9,.0f} "
            f"{p.step_time_s:>7.3g} {p.bound:<8.8} {hours_text(p.hours):>7} {hours_text(ckpt_h):>7} {money} "
            f"{'*' if p.pareto else ' '} {'=' if p.tie else ''}"
        )
    return "\n".join(lines)
