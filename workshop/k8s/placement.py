"""Chapter 06's placements as Kubernetes objects: "pods x GPUs per pod" on one instance type, as a
Karpenter pool sized to it and a TrainJob that asks for exactly those GPUs and EFA devices.
"""

from __future__ import annotations

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.k8s.karpenter import gpu_pool
from workshop.k8s.planned_job import ANNOTATION_PREFIX
from workshop.k8s.trainjob import gpu_trainjob, trainer_form
from workshop.plan.models import SEQ_LEN, get_preset
from workshop.plan.topology import ORIGINAL_STEPS, GpuInstance, OriginalWorkload, instance


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
    workload: OriginalWorkload | None = None,
):
    """The original workshop's job (a TrainJobSpec) as "pods x gpus_per_pod" on one instance type: chapter
    05's gpu_trainjob, with the per-pod GPU and EFA counts this chapter compares.

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
    w = workload or OriginalWorkload()
    # the original workload as it ran: the hub's weights, so the fine-tune's recipe (wikitext-2, seq 512,
    # lr 2e-5, warm-up 10) comes with them (workshop.plan.models.FINETUNE)
    spec = gpu_trainjob(
        f"{instance_type.split('.')[0]}-{pods}x{gpus_per_pod}-{network}",
        model=get_preset(w.model).hub_id or w.model,
        nodes=pods,
        instance_type=instance_type,
        gpus_per_node=gpus_per_pod,
        efa_per_node=efa,
        ipc_lock=trainer_form(trainer) == "runtimePatches",
        micro_batch=w.micro_batch,
        grad_accum=w.grad_accum,
        grad_ckpt=w.grad_ckpt,
        offload_optimizer=w.offload_optimizer,
        offload_param=w.offload_param,
        max_steps=ORIGINAL_STEPS,
        env={"NCCL_DEBUG": nccl_debug, **w.env},
        one_pod_per_node=True,
    )
    batch = pods * gpus_per_pod * w.micro_batch * w.grad_accum * SEQ_LEN  # what the original trained per step
    spec.annotations = {
        ANNOTATION_PREFIX + "global-batch-tokens": str(batch),
        ANNOTATION_PREFIX + "steps": str(ORIGINAL_STEPS),
        ANNOTATION_PREFIX + "tokens": str(batch * ORIGINAL_STEPS),
        ANNOTATION_PREFIX + "workload": "the original workshop's (chapter 06 compares its placements)",
    }
    return spec
