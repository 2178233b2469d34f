"""The traffic model: bytes per ZeRO stage over which wire, the step time they cost, and the original
workshop's GPU topologies predicted from their single-pod runs. Pure arithmetic: no torch, no processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.plan.topology import (
    GB,
    INSTANCES,
    ORIGINAL_RUNS,
    ORIGINAL_STEPS,
    OriginalRun,
    OriginalWorkload,
    instance,
    link,
)

# DeepSpeed's zero_optimization.overlap_comm per device: the one constant that the training config sets
# (workshop.train.deepspeed_config) and the planner prices (rates.OVERLAP, step_time's `overlap`). GPU: on,
# DeepSpeed's own ZeRO-3 default: NCCL gathers and reduce-scatters run on their own CUDA streams beside
# compute. CPU: off: gloo collectives run on the cores that compute, and DeepSpeed's CPU accelerator has no
# streams to overlap on. Kept here, beside the overlap model, with no catalog import: a rank imports it.
OVERLAP_COMM = {"cpu": False, "gpu": True}
HIDDEN_WHEN_OVERLAPPED = 0.5  # the share of an overlapped step's collectives hidden behind compute (assumed)

# ---------------------------------------------------------------- traffic model


def ring_factor(world: int) -> float:
    """A ring moves (N-1)/N of the buffer through every rank's link."""
    check_positive("world size", world)
    return (world - 1) / world


def gathers_per_micro_step(grad_ckpt: bool) -> int:
    """ZeRO-3 all-gathers every parameter for forward and for backward; checkpoint recompute adds one more."""
    return 3 if grad_ckpt else 2


@dataclass(frozen=True)
class Traffic:
    """Bytes each rank sends (= receives) per optimizer step, by collective, plus the PCIe offload copies."""

    stage: int
    world: int
    params: int
    grad_accum: int
    bytes_per_param: int
    gathers_per_micro: int
    all_gather: float
    reduce_scatter: float
    all_reduce: float
    pcie_h2d: float
    pcie_d2h: float

    @property
    def collective(self) -> float:
        return self.all_gather + self.reduce_scatter + self.all_reduce

    @property
    def pcie(self) -> float:
        return max(self.pcie_h2d, self.pcie_d2h)  # PCIe is full duplex: the busier direction sets the time


def zero_traffic(
    params: int,
    world: int,
    stage: int,
    *,
    grad_accum: int = 1,
    bytes_per_param: int = 2,
    grad_ckpt: bool = False,
    offload_param: bool = False,
    offload_optimizer: bool = False,
    reduce_scatter_as_all_reduce: bool = False,
) -> Traffic:
    """Per-rank bytes per optimizer step for ZeRO stage 0-3 (0 = plain data parallel).

    stage 0: one all-reduce of the gradients per step (accumulation stays local).
    stage 1: gradients reduce-scattered once per step, updated parameters all-gathered once per step.
    stage 2: gradients are partitioned, so they are reduce-scattered every micro-step.
    stage 3: parameters are partitioned too: all-gathered for every forward, backward (and recompute).
    `reduce_scatter_as_all_reduce`: backends such as gloo implement reduce-scatter as an all-reduce
    (twice the bytes); the collective benchmark measures which one yours does.
    """
    check_choice("ZeRO stage", stage, (0, 1, 2, 3))
    check_positive("params", params)
    check_positive("grad_accum", grad_accum)
    check_positive("bytes_per_param", bytes_per_param)
    size = float(params) * bytes_per_param
    r = ring_factor(world)
    rs = 2 * r * size if reduce_scatter_as_all_reduce else r * size
    k = gathers_per_micro_step(grad_ckpt) if stage == 3 else 0
    ag = rsc = ar = 0.0
    if stage == 0:
        ar = 2 * r * size
    elif stage == 1:
        rsc, ag = rs, r * size
    elif stage == 2:
        rsc, ag = grad_accum * rs, r * size
    else:
        rsc, ag = grad_accum * rs, grad_accum * k * r * size
    shard = size / world
    h2d = d2h = 0.0
    if offload_optimizer:
        d2h = shard * (grad_accum if stage >= 2 else 1)  # gradient partitions go to the CPU optimizer
        h2d = shard  # updated parameters come back
    if stage == 3 and offload_param:
        h2d = grad_accum * k * shard  # every gather first fetches the local shard from host memory
    return Traffic(stage, world, params, grad_accum, bytes_per_param, k, ag, rsc, ar, h2d, d2h)


# ---------------------------------------------------------------- step time


@dataclass(frozen=True)
class StepPrediction:
    compute_s: float
    collective_s: float
    pcie_s: float
    overlap: float
    total_s: float

    @property
    def exposed_s(self) -> float:
        return self.total_s - self.compute_s


def step_time(
    traffic: Traffic,
    *,
    collective_gbytes_per_s: float,
    compute_s: float,
    overlap: float = 0.0,
    pcie_gbytes_per_s: float | None = None,
) -> StepPrediction:
    """compute + (1 - overlap) x communication; `overlap` is the stated fraction hidden behind compute."""
    check_positive("collective bandwidth", collective_gbytes_per_s)
    check_positive("compute time", compute_s, allow_zero=True)
    if not 0.0 <= overlap < 1.0:
        raise WorkshopError(f"overlap must be in [0, 1), got {overlap!r}")
    coll = traffic.collective / (collective_gbytes_per_s * GB)
    pcie = traffic.pcie / (pcie_gbytes_per_s * GB) if pcie_gbytes_per_s else 0.0
    return StepPrediction(compute_s, coll, pcie, overlap, compute_s + (1 - overlap) * (coll + pcie))


def original_traffic(w: OriginalWorkload | None = None) -> Traffic:
    """Bytes per rank per optimizer step (a Traffic, in bytes) of the original workshop's workload (default:
    its chapter 003 settings), from zero_traffic."""
    w = w or OriginalWorkload()
    return zero_traffic(
        w.params,
        w.world,
        w.knobs.zero_stage,
        grad_accum=w.grad_accum,
        bytes_per_param=w.bytes_per_param,
        grad_ckpt=w.knobs.grad_ckpt,
        offload_param=w.knobs.offload_param,
        offload_optimizer=w.knobs.offload_optimizer,
    )


def collective_bandwidth(
    instance_name: str, pods: int, network: str | None, *, efa_per_pod: int = 1
) -> float:
    """Effective GB/s of the slowest edge of the ring: NVLink/PCIe inside one pod, the pod's NIC(s) across
    pods."""
    inst = instance(instance_name)
    intra = link(inst.intra_link).effective_gbytes_per_s
    if pods == 1:
        return intra
    check_choice("network between pods", network, ("efa", "eni"))
    assert network is not None  # check_choice refused None
    per_pod = link(network).effective_gbytes_per_s * (efa_per_pod if network == "efa" else 1)
    return min(intra, per_pod)


@dataclass(frozen=True)
class OriginalRow:
    label: str
    instance: str
    pods: int
    network: str | None
    transport: str
    measured_s: float  # per optimizer step
    predicted_s: float
    compute_s: float
    collective_s: float
    pcie_s: float
    fitted: bool  # True for the single-pod run the compute time was read from
    retest: bool

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1


def _predict(
    run: OriginalRun,
    network: str | None,
    compute_s: float,
    overlap: float,
    efa_per_pod: int,
    traffic: Traffic,
) -> StepPrediction:
    inst = instance(run.instance)
    bw = collective_bandwidth(run.instance, run.pods, network, efa_per_pod=efa_per_pod)
    return step_time(
        traffic,
        collective_gbytes_per_s=bw,
        compute_s=compute_s,
        overlap=overlap,
        pcie_gbytes_per_s=link(inst.pcie).effective_gbytes_per_s,
    )


def original_comparison(
    *, overlap: float = 0.0, efa_per_pod: int = 1, workload: OriginalWorkload | None = None
) -> list[OriginalRow]:
    """Predict every run of the original workshop. Per instance, compute time = its single-pod step minus the
    modelled comms.

    A multi-pod run whose transport the original workshop did not record is predicted twice (EFA and ENI).
    Returns one OriginalRow per prediction: measured and predicted seconds per optimizer step, split into
    compute, collective and PCIe seconds; `error` is predicted / measured - 1.
    """
    traffic = original_traffic(workload)
    rows: list[OriginalRow] = []
    for name in INSTANCES:
        runs = [r for r in ORIGINAL_RUNS if r.instance == name]
        single = next(r for r in runs if r.pods == 1)
        measured1 = single.seconds / ORIGINAL_STEPS
        comm1 = _predict(single, None, 0.0, overlap, efa_per_pod, traffic)
        compute = measured1 - comm1.total_s
        if compute <= 0:
            raise WorkshopError(f"{name}: modelled comms ({comm1.total_s:.1f} s) exceed the measured step")
        for run in runs:
            # (network, label) per prediction: a transport the original did not record is predicted twice
            nets: list[tuple[str | None, str]] = [(run.network, run.label)]
            if run.network == "unrecorded":
                nets = [(n, run.label.replace("?", f"{n.upper()}?")) for n in ("efa", "eni")]
            for net, label in nets:
                p = _predict(run, net, compute, overlap, efa_per_pod, traffic)
                rows.append(
                    OriginalRow(
                        label,
                        name,
                        run.pods,
                        net,
                        run.transport,
                        run.seconds / ORIGINAL_STEPS,
                        p.total_s,
                        compute,
                        p.collective_s,
                        p.pcie_s,
                        run.pods == 1,
                        run.retest,
                    )
                )
    return rows


class InstanceOrdering(TypedDict):
    single_pod_fastest: bool  # predicted, as measured
    recorded_order_matches: bool  # the runs with a recorded transport, predicted in their measured order
    measured_order: list[str]  # labels, fastest first


class OriginalChecks(TypedDict):
    """`original_checks()`'s record: what chapter 06 claims about the model against the original runs."""

    ordering: dict[str, InstanceOrdering]  # per instance type
    ordering_ok: bool
    global_order_swaps: list[tuple[str, str]]  # (faster measured, slower measured) pairs the model swaps
    p4d_ratio_measured: float  # p4d 4 pods over EFA / 1 pod, step time
    p4d_ratio_predicted: float
    p4d_ratio_error: float  # predicted / measured - 1
    p4d_eni_error: float


def original_checks(rows: list[OriginalRow]) -> OriginalChecks:
    """The chapter's claims, computed: per-instance ordering and the p4d EFA/single-pod ratio. Returns an
    OriginalChecks record; its ratios are step time over step time (unitless), its errors predicted /
    measured - 1."""
    ordering: dict[str, InstanceOrdering] = {}
    for name in INSTANCES:
        mine = [r for r in rows if r.instance == name]
        recorded = [r for r in mine if "?" not in r.label]
        single = next(r for r in mine if r.pods == 1)
        ok = all(r.predicted_s > single.predicted_s for r in mine if r.pods > 1)
        measured_order = [r.label for r in sorted(recorded, key=lambda r: r.measured_s)]
        predicted_order = [r.label for r in sorted(recorded, key=lambda r: r.predicted_s)]
        ordering[name] = {
            "single_pod_fastest": ok,
            "recorded_order_matches": measured_order == predicted_order,
            "measured_order": measured_order,
        }
    # across instances (rows whose transport was recorded): which neighbouring pairs swap places
    recorded = sorted((r for r in rows if "?" not in r.label), key=lambda r: r.measured_s)
    swaps = [
        (a.label, b.label)
        for i, a in enumerate(recorded)
        for b in recorded[i + 1 :]
        if a.predicted_s > b.predicted_s
    ]
    p4d = {r.network: r for r in rows if r.instance == "p4d.24xlarge"}
    measured_ratio = p4d["efa"].measured_s / p4d[None].measured_s
    predicted_ratio = p4d["efa"].predicted_s / p4d[None].predicted_s
    return {
        "ordering": ordering,
        "ordering_ok": all(
            v["single_pod_fastest"] and v["recorded_order_matches"] for v in ordering.values()
        ),
        "global_order_swaps": swaps,
        "p4d_ratio_measured": measured_ratio,
        "p4d_ratio_predicted": predicted_ratio,
        "p4d_ratio_error": predicted_ratio / measured_ratio - 1,
        "p4d_eni_error": p4d["eni"].error,
    }


class OverlapPoint(TypedDict):
    overlap: float
    p4d_ratio_predicted: float
    p4d_ratio_error: float


def overlap_sweep(overlaps: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)) -> list[OverlapPoint]:
    """How the p4d ratio depends on the one stated parameter the data cannot pin down. Returns one point per
    overlap (the share of comms hidden behind compute, 0-1): the predicted p4d 4-pod / 1-pod step-time ratio
    and its error against the measured one (predicted / measured - 1)."""
    out: list[OverlapPoint] = []
    for ov in overlaps:
        c = original_checks(original_comparison(overlap=ov))
        out.append(
            {
                "overlap": ov,
                "p4d_ratio_predicted": c["p4d_ratio_predicted"],
                "p4d_ratio_error": c["p4d_ratio_error"],
            }
        )
    return out


class BandwidthPoint(TypedDict):
    gbytes_per_s: float
    step_s: float


def bandwidth_sweep(
    gbytes_per_s: list[float],
    *,
    compute_s: float,
    traffic: Traffic | None = None,
    pcie_gbytes_per_s: float | None = None,
    overlap: float = 0.0,
) -> list[BandwidthPoint]:
    """Step time as the inter-rank bandwidth varies: where a run stops being compute-bound. `gbytes_per_s`
    and `pcie_gbytes_per_s` in GB/s, `compute_s` in seconds per step; returns one point per bandwidth, its
    step time `step_s` in seconds."""
    traffic = traffic or original_traffic()
    return [
        {
            "gbytes_per_s": b,
            "step_s": step_time(
                traffic,
                collective_gbytes_per_s=b,
                compute_s=compute_s,
                overlap=overlap,
                pcie_gbytes_per_s=pcie_gbytes_per_s,
            ).total_s,
        }
        for b in gbytes_per_s
    ]
