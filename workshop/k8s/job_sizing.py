"""How big a TrainJob is, as it is given: nodes and ranks, the pod sizes of a recommendation made for that
node count (checked, never re-planned), and a GPU instance type's GPUs and EFA interfaces."""

from __future__ import annotations

from workshop.errors import WorkshopError, check_count, check_positive
from workshop.plan.catalog import instance_info


def check_nodes(nodes) -> None:
    """A node count: an integer >= 1 (errors.check_count, the one count check)."""
    check_count("nodes", nodes)


def sized(nodes: int | None, procs_per_node: int | None, recommendation, *, sizes_given: bool):
    """(nodes, ranks per node, recommendation) of a CPU job rendered from sizes it is given: a
    recommendation (workshop.plan.fit's) or every pod size. Nothing is planned here: a planned job renders
    with workshop.k8s.planned_job.plan_trainjob(plan)."""
    if recommendation is None and not sizes_given:
        raise WorkshopError(
            "cpu_trainjob renders given sizes: pass recommendation= (workshop.plan.fit.recommend) or cpu, "
            "memory, shm_size and threads_per_rank; a planned job renders with "
            "workshop.k8s.planned_job.plan_trainjob(plan)"
        )
    if nodes is None:
        nodes = getattr(recommendation, "nodes", 4)
    if procs_per_node is None:
        procs_per_node = getattr(recommendation, "procs_per_node", 1)
    check_nodes(nodes)
    check_count("procs_per_node", procs_per_node)
    return nodes, procs_per_node, _sized_for(recommendation, nodes, procs_per_node)


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
