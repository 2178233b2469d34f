"""How big a TrainJob is: nodes and ranks from chapter 01's plan (or the planner's pick), the pod sizes of a
recommendation made for that node count, and a GPU instance type's GPUs and EFA interfaces."""

from __future__ import annotations

from dataclasses import replace

from workshop.errors import WorkshopError, check_count, check_positive
from workshop.plan.catalog import instance_info


def check_nodes(nodes) -> None:
    """A node count: an integer >= 1 (errors.check_count, the one count check)."""
    check_count("nodes", nodes)


def planned(
    model: str,
    nodes: int | None,
    procs_per_node: int | None,
    plan,
    recommendation,
    train_kw: dict,
    catalog_source: str | None,
    *,
    sized: bool,
):
    """(nodes, ranks per node, recommendation, training settings, threads per rank or None) of a CPU job:
    the plan's (the planner's best for `nodes`, default 4, when neither a plan, a recommendation nor every
    pod size (`sized`) is given), checked against the recommendation."""
    if nodes is not None:
        check_nodes(nodes)
    if plan is None and recommendation is None and not sized:
        plan = _default_plan(model, nodes, procs_per_node, catalog_source)
    threads = None
    if plan is not None:
        nodes, procs_per_node, recommendation, train_kw = _follow_plan(
            plan, model, nodes, procs_per_node, recommendation, train_kw, catalog_source
        )
        threads = plan.threads_per_rank
    nodes = 4 if nodes is None else nodes
    procs_per_node = 1 if procs_per_node is None else procs_per_node
    check_nodes(nodes)
    return nodes, procs_per_node, _sized_for(recommendation, nodes, procs_per_node), train_kw, threads


def _default_plan(model: str, nodes: int | None, procs_per_node: int | None, catalog_source: str | None):
    """The cost planner's best plan for `nodes` (default 4) AMX nodes, when the caller gave none."""
    from workshop.plan import cost
    from workshop.plan.options import Options

    opts = Options(
        model=model,
        families=("c7i", "m7i", "r7i"),
        nodes=(4 if nodes is None else nodes,),
        source=catalog_source,
    )
    return cost.rank(replace(opts, procs_per_node=procs_per_node))[0]


def _follow_plan(plan, model: str, nodes, procs_per_node, recommendation, train_kw: dict, catalog_source):
    """(nodes, ranks per node, recommendation, training settings) as the plan says; a node count,
    recommendation or setting that contradicts it is refused."""
    from workshop.plan import cost

    nodes = plan.nodes if nodes is None else nodes
    procs_per_node = plan.procs_per_node if procs_per_node is None else procs_per_node
    rec_type = getattr(recommendation, "instance_type", None)
    cost.check_plan_matches(plan, nodes=nodes, procs_per_node=procs_per_node, instance_type=rec_type)
    settings = cost.train_settings(plan)
    clash = {k: v for k, v in train_kw.items() if k in settings and settings[k] != v}
    if clash:
        raise WorkshopError(f"{clash} contradicts the plan's { ({k: settings[k] for k in clash}) }: re-plan")
    recommendation = recommendation or cost.recommendation(plan, model, source=catalog_source)
    return nodes, procs_per_node, recommendation, {**settings, **train_kw}


def _sized_for(rec, nodes: int, procs_per_node: int):
    """The recommendation, refused when it was sized for another node or rank count."""
    for attr, want in (("nodes", nodes), ("procs_per_node", procs_per_node)):
        got = getattr(rec, attr, want)
        if got != want:
            raise WorkshopError(
                f"the recommendation is sized for {attr}={got}, the TrainJob asks {want}: "
                "size it for this cluster"
            )
    return rec


def gpu_counts(instance_type: str, gpus: int | None, efa: int | None, source: str | None) -> tuple[int, int]:
    """(GPUs, EFA interfaces) per node: the instance type's from the catalog unless given."""
    if gpus is None or efa is None:
        info = instance_info(instance_type, source=source)
        if not info.gpus:
            raise WorkshopError(
                f"{instance_type} has no GPU; pick a GPU type such as p4d.24xlarge or g6e.8xlarge"
            )
        gpus = gpus or info.gpus
        efa = info.max_efa_interfaces if efa is None else efa
    check_positive("gpus_per_node", gpus)
    check_positive("efa_per_node", efa, allow_zero=True)
    return gpus, efa


def gpu_resources(gpus: int, efa: int, cpu: str | None, memory: str | None) -> tuple[dict, dict]:
    """(requests, limits) of a GPU pod: its GPUs, EFA interfaces, and the cpu and memory asked for."""
    limits = {"nvidia.com/gpu": str(gpus)}
    if efa:
        limits["vpc.amazonaws.com/efa"] = str(efa)
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if memory:
        limits["memory"] = memory
    return requests, limits
