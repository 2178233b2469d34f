"""The TrainJob of a plan file: exactly the plan's placement (nodes, ranks, threads, pod sizes) and its Job
as the arguments, with the job's global batch, tokens, steps and predicted hours and dollars as annotations
(and in the entry point's start line). Nothing is planned here; the plan comes from workshop.plan.job.
"""

from __future__ import annotations

import math

from workshop.k8s.job_sizing import gpu_resources
from workshop.k8s.karpenter import AMX_TAINT
from workshop.k8s.site import EXAMPLE_ZONE
from workshop.k8s.storage import OutputStorage, default_fsx
from workshop.k8s.trainjob import (
    DEFAULT_REGISTRY,
    HFTokenSecret,
    TrainJobSpec,
    hf_home,
    image_ref,
    train_args,
    trainer_form,
)
from workshop.plan.catalog import DAEMONSET_VCPUS, allocatable, instance_info
from workshop.plan.job import Plan, stored_plan

ANNOTATION_PREFIX = "workshop.example.com/"


def plan_trainjob(
    plan: Plan,
    name: str | None = None,
    *,
    namespace: str = "default",
    registry: str = DEFAULT_REGISTRY,
    storage: OutputStorage | None = None,
    hf_secret: HFTokenSecret | None = None,
    node_pool: str | None = None,
    trainer: str | None = None,
    zone: str | None = None,
) -> TrainJobSpec:
    """The TrainJob of exactly this plan (workshop.plan.job.Plan): its placement's nodes, ranks, threads
    and pod sizes (CPU pods Guaranteed: whole cores, requests == limits), its Job as the arguments, and the
    job's global batch, tokens, steps and the plan's prediction as annotations and in the environment the
    entry point's start line prints. With `zone`, the pods land in that zone only (the FSx subnet's), so a
    ring never crosses zones. Nothing is re-planned here."""
    pl = plan.placement
    cpu = pl.device == "cpu"
    name = name or f"{pl.device}-{plan.job.model.replace('.', '-')}"
    pool = node_pool or ("cpu-amx" if cpu else "gpu")
    summary = plan.summary()
    args = train_args(
        plan.job.train_model,
        name=name,
        storage=storage,
        with_recipe=False,
        **{k: v for k, v in plan.train_kwargs().items() if k != "model"},
    )
    env = {
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HOME": hf_home(storage),
        "WORKSHOP_PLAN": " ".join(f"{k}={v}" for k, v in summary.items()),
    }
    requests, limits, tolerations = _pod(plan, env)
    return TrainJobSpec(
        name=name,
        namespace=namespace,
        image=image_ref(pl.device, registry),
        train_args=args,
        nodes=pl.nodes,
        procs_per_node=pl.procs_per_node,
        requests=requests,
        limits=limits,
        env=env,
        storage=storage,
        hf_secret=hf_secret,
        node_selector={"karpenter.sh/nodepool": pool}
        | ({"topology.kubernetes.io/zone": zone} if zone else {}),
        tolerations=tolerations,
        shm_size=pl.shm_size,
        capabilities=["IPC_LOCK"]
        if not cpu and pl.efa_per_node and trainer_form(trainer or plan.trainer) == "runtimePatches"
        else [],
        one_pod_per_node=True,
        labels={"workshop/accelerator": pl.device},
        annotations={ANNOTATION_PREFIX + k: v for k, v in summary.items()},
    )


def _pod(plan: Plan, env: dict[str, str]) -> tuple[dict, dict, list[dict]]:
    """(requests, limits, tolerations) of the plan's node pod, its device's variables added to `env`: a CPU
    pod Guaranteed (whole cores, requests == limits), a GPU pod Guaranteed too: its GPUs and EFA interfaces,
    and the placement's cpu and memory, or (a plan that leaves them unsized) gpu_pod_size's."""
    pl = plan.placement
    if pl.device == "cpu":
        key, value, effect = AMX_TAINT
        whole = {"cpu": str(pl.cpu_request), "memory": str(pl.memory_request)}
        requests, limits = dict(whole), dict(whole)
        env["OMP_NUM_THREADS"] = str(pl.threads_per_rank)
        tolerations = [{"key": key, "operator": "Equal", "value": value, "effect": effect}]
    else:
        cpu, memory = pl.cpu_request, pl.memory_request
        if not (cpu and memory):
            cpu, memory = gpu_pod_size(pl.pool_types, pl.catalog)
        requests, limits = gpu_resources(pl.gpus_per_node, pl.efa_per_node, cpu, memory)
        limits["cpu"] = cpu  # requests == limits: a Guaranteed pod, the last the kubelet evicts
        env.update({"NCCL_DEBUG": "WARN"})
        if pl.efa_per_node:
            rdma = "1" if pl.instance_type.startswith("p") else "0"
            env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": rdma})
        tolerations = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "vpc.amazonaws.com/efa", "operator": "Exists", "effect": "NoSchedule"},
        ]
    return requests, limits, tolerations


DAEMONSET_GIB = 2  # memory left on a GPU node for the daemonsets (CNI, device plugins, EFA, node exporter)


def gpu_pod_size(pool_types, catalog: str | None) -> tuple[str, str]:
    """(cpu, memory) of a GPU node pod (one per node): what every type of its pool can give a pod (the
    catalog's allocatable: after the VM, kubelet and eviction reserves) less the daemonsets' share, so the
    pod fits whichever type Karpenter launches and is Guaranteed, not BestEffort (the first pod evicted under
    memory pressure)."""
    alloc = [allocatable(instance_info(t, source=catalog)) for t in pool_types]
    cpu = max(1, math.floor(min(v for _m, v in alloc)) - DAEMONSET_VCPUS)
    return str(cpu), f"{max(1, math.floor(min(m for m, _v in alloc)) - DAEMONSET_GIB)}Gi"


# Default manifests (registered in workshop/k8s/render.py): the original workshop's 4-node Llama-3-8B jobs,
# fixed.
def default_cpu_job(trainer: str | None = None) -> TrainJobSpec:
    """The stored 4-node CPU plan (manifests/plans/cpu-4-nodes.json, from the offline catalog), so the
    checked-in YAML is the same everywhere."""
    return plan_trainjob(
        stored_plan("cpu"),
        "cpu-llama3",
        hf_secret=HFTokenSecret(),
        storage=default_fsx(),
        trainer=trainer,
        zone=EXAMPLE_ZONE,
    )


def default_gpu_job(trainer: str | None = None) -> TrainJobSpec:
    """The stored GPU plan (manifests/plans/gpu.json): the planner's first GPU plan, same global batch."""
    return plan_trainjob(
        stored_plan("gpu"),
        "gpu-llama3",
        hf_secret=HFTokenSecret(),
        storage=default_fsx(),
        trainer=trainer,
        zone=EXAMPLE_ZONE,
    )
