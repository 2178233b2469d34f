"""Full fine-tuning or LoRA: each method's cheapest plan for the same job, with its memory per rank (chapter
01 prints them side by side)."""

from __future__ import annotations

from dataclasses import replace

from workshop.plan.cost import rank
from workshop.plan.estimate import Plan, memory_options
from workshop.plan.memory import METHODS, GiB, plan_memory
from workshop.plan.options import Options


def per_rank_gib(plan: Plan, model: str) -> float:
    """GiB one rank of the plan holds (every component of the memory plan, wherever it lives)."""
    mem = plan_memory(
        model,
        world_size=plan.nodes * plan.procs_per_node,
        procs_per_node=plan.procs_per_node,
        device=plan.device,
        **memory_options(plan),
    )
    return mem.total / GiB


def cheapest_by_method(opts: Options, ranked: dict[str, list[Plan]] | None = None) -> list[dict]:
    """One row per method: its cheapest plan (`ranked`: plans already ranked, by method), ranks, memory per
    rank in GiB, hours and USD."""
    rows = []
    for method in METHODS:
        plans = (ranked or {}).get(method) or rank(replace(opts, method=method))
        best = plans[0]
        rows.append(
            {
                "method": method,
                "plan": best.label,
                "ranks": best.nodes * best.procs_per_node,
                "zero": best.zero_stage,
                "gib_per_rank": round(per_rank_gib(best, opts.model), 1),
                "hours": round(best.hours, 2),
                "usd": None if best.usd is None else round(best.usd),
            }
        )
    return rows
