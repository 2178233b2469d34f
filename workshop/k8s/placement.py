"""Chapter 06's placements as Kubernetes objects: "pods x GPUs per pod" on one instance type, as a
Karpenter pool sized to it and a TrainJob that asks for exactly those GPUs and EFA devices.
"""

from __future__ import annotations

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.k8s.karpenter import gpu_pool
from workshop.k8s.planned_job import ANNOTATION_PREFIX
from workshop.k8s.trainjob import gpu_trainjob, train_args, trainer_form
from workshop.plan.original import original_plan
from workshop.plan.topology import GpuInstance, OriginalWorkload, instance


def _check_placement(instance_type: str, pods: int, gpus_per_pod: int) -> GpuInstance:

    inst = instance(instance_type)
    check_positive("pods", pods)
    check_positive("gpus_per_pod", gpus_per_pod)
    if gpus_per_pod > inst.gpus:
        raise WorkshopError(f"{instance_type} has {inst.gpus} GPUs; a pod cannot ask for {gpus_per_pod}")
    return inst


def placement_pool(instance_type: str, pods: int, gpus_per_pod: int, *, zone: str = "us-west-2b"):
    """The Karpenter GPU pool (a Pool) for "pods x gpus_per_pod": one instance type, a GPU limit (in
    GPUs) that fits exactly the nodes the placement can need (worst case: every pod on its own node),
    nothing more."""

    inst = _check_placement(instance_type, pods, gpus_per_pod)
    name = f"gpu-{pods}x{gpus_per_pod}"
    return gpu_pool([instance_type], zone=zone, gpu_limit=pods * inst.gpus, name=name)


PLACEMENT_NETWORKS = ("efa", "eni")


def placement_trainjob(
    instance_type: str,
    pods: int,
    gpus_per_pod: int,
    *,
    network: str = "efa",
    efa_per_pod: int | None = None,
    trainer: str = "2.3.0",
    nccl_debug: str = "INFO",
):
    """The original workshop's job (a TrainJobSpec) as "pods x gpus_per_pod" on one instance type, from its
    plan (workshop.plan.original: the original's Job, this placement, chapter 06's predicted step): chapter
    05's gpu_trainjob with the per-pod GPU and EFA counts this chapter compares, the plan's Job as the
    arguments and its global batch, tokens, steps and predicted hours and dollars as annotations.

    EFA per pod: a single pod gets all of the instance's devices; several pods get one each, as in the
    original workshop (pass efa_per_pod to give them more); network="eni" requests none, so NCCL falls back to
    NET/Socket. NCCL_DEBUG=INFO makes the transport visible in the pod logs. Trainer v2.1 cannot add
    IPC_LOCK from a TrainJob, so that form is rendered without it (EKS AMIs already raise memlock).
    """

    inst = _check_placement(instance_type, pods, gpus_per_pod)
    check_choice("network between pods", network, PLACEMENT_NETWORKS)
    if network == "eni":
        efa = 0
    else:
        efa = efa_per_pod if efa_per_pod is not None else (inst.efa_devices if pods == 1 else 1)
        check_positive("efa_per_pod", efa)
    plan = original_plan(instance_type, pods, gpus_per_pod, network=network, efa_per_pod=efa)
    w = OriginalWorkload()
    spec = gpu_trainjob(
        f"{instance_type.split('.')[0]}-{pods}x{gpus_per_pod}-{network}",
        nodes=pods,
        instance_type=instance_type,
        gpus_per_node=gpus_per_pod,
        efa_per_node=efa,
        ipc_lock=trainer_form(trainer) == "runtimePatches",
        args=train_args(
            plan.job.train_model,
            name=f"{instance_type.split('.')[0]}-{pods}x{gpus_per_pod}-{network}",
            with_recipe=False,
            **{k: v for k, v in plan.train_kwargs().items() if k != "model"},
        ),
        env={"NCCL_DEBUG": nccl_debug, **w.env},
        one_pod_per_node=True,
    )
    spec.annotations = {
        **{ANNOTATION_PREFIX + k: v for k, v in plan.summary().items()},
        ANNOTATION_PREFIX + "workload": "the original workshop's (chapter 06 compares its placements)",
        ANNOTATION_PREFIX + "predicted-by": plan.prediction.sources["step"],
    }
    return spec
