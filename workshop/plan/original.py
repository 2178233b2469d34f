"""The original workshop's workload as a Plan (chapter 06): "pods x GPUs per pod" on one GPU instance type,
its Job the original's (Llama-3-8B from the hub, wikitext-2, seq 512, ZeRO-3 with both offloads and
activation checkpointing, micro-batch 1, accumulation 4, 50 steps), its Prediction chapter 06's topology model
(bytes per step over link bandwidth, plus the compute fitted on the instance's single-pod run).

Why a plan: the TrainJobs chapter 06 renders state their global batch, tokens, steps and predicted hours and
dollars like every planned job (issue 46). The cost planner ranks whole nodes; these placements put fewer
GPUs in a pod than the node has, so the step time comes from the model chapter 06 checks against the
original runs, not from the ranking.
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import date

from workshop.errors import WorkshopError
from workshop.plan import rates
from workshop.plan.catalog import instance_info
from workshop.plan.job import Job, Placement, Plan, Prediction, check_hosts
from workshop.plan.knobs import Knobs
from workshop.plan.models import get_preset
from workshop.plan.options import STATE_BYTES_PER_PARAM
from workshop.plan.topology import GB, ORIGINAL_STEPS, OriginalWorkload, instance, link
from workshop.plan.traffic import collective_bandwidth, original_comparison, original_traffic, step_time

CATALOG = "moto"  # the offline catalog: the same plan (and price) everywhere


def original_job(world: int, w: OriginalWorkload | None = None) -> Job:
    """The original workshop's Job on `world` GPUs: its knobs as it ran them (OriginalWorkload.knobs: the
    hub weights' fine-tune recipe), a global batch of world x micro-batch x accumulation x sequence tokens, 50
    steps."""
    w = w or OriginalWorkload()
    batch = world * w.knobs.micro_batch * w.grad_accum * w.knobs.seq_len
    return Job(
        **{f.name: getattr(w.knobs, f.name) for f in fields(Knobs)},
        model=get_preset(w.model).name,
        weights="hub",
        tokens=float(batch * ORIGINAL_STEPS),
        global_batch=batch,
    )


def _original_step(
    instance_type: str, pods: int, network: str, efa_per_pod: int, w: OriginalWorkload, world: int
):
    """Chapter 06's topology model of one step: bytes over the link plus the compute fitted on the
    original's single-pod run of this instance (a type with no such run is refused, naming the ones with)."""
    fitted = [r for r in original_comparison(workload=w) if r.instance == instance_type and r.fitted]
    if not fitted:
        raise WorkshopError(
            f"{instance_type}: the original workshop has no single-pod run to fit its compute on; allowed: "
            f"{', '.join(sorted({r.instance for r in original_comparison(workload=w) if r.fitted}))}"
        )
    inst = instance(instance_type)
    step = step_time(
        original_traffic(replace(w, world=world)),
        collective_gbytes_per_s=collective_bandwidth(
            instance_type, pods, network if pods > 1 else None, efa_per_pod=max(1, efa_per_pod)
        ),
        compute_s=fitted[0].compute_s,
        pcie_gbytes_per_s=link(inst.pcie).effective_gbytes_per_s,
    )
    return step


def original_plan(
    instance_type: str, pods: int, gpus_per_pod: int, *, network: str = "efa", efa_per_pod: int = 1
) -> Plan:
    """The Plan of the original workload as `pods` pods of `gpus_per_pod` GPUs on `instance_type`, one pod
    per node (anti-affinity), each node billed whole at the offline catalog's on-demand price."""
    w = OriginalWorkload()
    world = pods * gpus_per_pod
    job = original_job(world, w)
    row = instance_info(instance_type, source=CATALOG)
    placement = Placement(
        instance_type=instance_type,
        device="gpu",
        nodes=pods,
        procs_per_node=gpus_per_pod,
        threads_per_rank=1,
        cpu_request=None,
        memory_request=None,
        shm_size="64Gi",
        gpus_per_node=gpus_per_pod,
        efa_per_node=efa_per_pod if network == "efa" else 0,
        pool_types=(instance_type,),
        catalog=CATALOG,
    )
    step = _original_step(instance_type, pods, network, efa_per_pod, w, world)
    train_h = job.steps * step.total_s / 3600
    write = rates.STORAGE["fsx"].gbytes_per_s
    saves = job.steps // job.save_steps if job.save_steps else 0
    ckpt_h = saves * w.params * STATE_BYTES_PER_PARAM / GB / write.value / 3600
    per_hour = row.hourly_usd * pods if row.hourly_usd is not None else None
    hours = train_h + ckpt_h
    prediction = Prediction(
        hours=hours,
        train_hours=train_h,
        checkpoint_hours=ckpt_h,
        usd=per_hour * hours if per_hour is not None else None,
        usd_per_hour=per_hour,
        fixed_usd=None,
        bound="collective" if step.collective_s + step.pcie_s > step.compute_s else "compute",
        tokens_per_s=job.global_batch / step.total_s,
        step_time_s=step.total_s,
        price_kind="on-demand",
        sources={
            "step": "chapter 06's topology model: bytes per step over link bandwidth plus the compute fitted "
            f"on the original's single-pod {instance_type} run (in-sample for 1 pod)",
            "hours": "the steps and their checkpoint writes only (no start-up, download or final save)",
            "price": f"{instance_type} on demand ({CATALOG} catalog), each pod's node billed whole",
            "checkpoints": f"{saves} save(s) of {STATE_BYTES_PER_PARAM} B/param to fsx at {write.cite()}",
        },
        made=date.today().isoformat(),
    )
    plan = Plan(job=job, placement=placement, prediction=prediction)
    check_hosts(plan)
    return plan
