"""The machines the estimator prices: one Node per catalog row (an AMX host or a GPU node), each rate with its
source.

Why apart from the estimate: what a node computes at and which links its collectives cross is read from the
catalog and the rates once; the estimate (workshop.plan.estimate) only prices a job on a Node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workshop.errors import WorkshopError
from workshop.lang import _
from workshop.plan import calibration, rates
from workshop.plan.catalog import InstanceRow
from workshop.plan.fit import pod_cores
from workshop.plan.hardware import AMX_BF16_FLOP_PER_CYCLE
from workshop.plan.options import Options
from workshop.plan.topology import LINKS


@dataclass(frozen=True)
class Node:
    """One node as the estimator sees it: what a rank computes at, and the links its collectives cross."""

    name: str
    device: str  # "cpu" or "gpu"
    max_ranks: int  # GPUs, or physical cores
    peak_tflops: float  # per GPU; for a CPU, the whole node (ranks share it)
    efficiency: rates.Rate  # fraction of peak a training step reaches
    mem_gbytes_per_s: float  # per GPU (HBM) or the whole node (DDR): the optimizer step
    host_mem_gbytes_per_s: float  # the host's DDR, for an offloaded optimizer
    intra_gbytes_per_s: float  # collective bandwidth between ranks of one node (effective)
    intra_latency: rates.Rate
    inter_gbytes_per_s: float  # collective bandwidth between nodes (effective, per node)
    inter_latency: rates.Rate
    inter_transport: str
    pcie_gbytes_per_s: float | None  # host <-> GPU, for offload copies
    overlap: rates.Rate
    usd_per_hour: rates.Rate | None
    sources: dict[str, str] = field(default_factory=dict)


def _cpu_node(row: InstanceRow, opts: Options, clock: rates.Rate | None = None) -> Node:
    """An AMX host as the estimator's Node. `clock`: the host's own measured clock, for a check against a
    run on a known machine (costcheck.amx_rows); a catalog type is priced at the clock of the CPU rate."""
    if not (row.amx and row.clock_ghz):
        raise WorkshopError(f"{row.instance_type}: the CPU estimate needs AMX and a clock ({row.amx_reason})")
    # a catalog type: its pod's cores (fit.pod_cores: what the pod requests and runs a thread on), at the
    # clock of the CPU rate; a known host (`clock` given, costcheck): its own cores, as its run used them
    cores = pod_cores(row) if clock is None else row.cores
    clock = clock or calibration.cpu_clock_basis(opts.ceiling, opts.cpu_engine)
    peak = cores * clock.value * AMX_BF16_FLOP_PER_CYCLE / 1000
    eff = opts.cpu_efficiency or calibration.cpu_efficiency(opts.cpu_engine, opts.ceiling, cores)
    flow = rates.tcp_flow_gbps(opts.placement_group, opts.ena_express)
    nic = rates.instance_gbps(row)
    inter = min(nic, flow.value) * rates.TCP_EFFICIENCY.value / 8
    local_bw, local_lat = rates.gloo_local_fit()
    ddr = rates.DDR_GBYTES_PER_S_PER_CORE.value * row.cores
    return Node(
        name=row.instance_type,
        device="cpu",
        max_ranks=cores,
        peak_tflops=peak,
        efficiency=eff,
        mem_gbytes_per_s=ddr,
        host_mem_gbytes_per_s=ddr,
        intra_gbytes_per_s=local_bw.value,
        intra_latency=local_lat,
        inter_gbytes_per_s=inter,
        inter_latency=rates.LATENCY_S["tcp"],
        inter_transport=_(
            "gloo over TCP: one flow per ring neighbour, min({nic:g} Gbps NIC, {flow:g} Gbps flow)"
        ).format(nic=nic, flow=flow.value),
        pcie_gbytes_per_s=None,
        overlap=rates.OVERLAP["cpu"],
        usd_per_hour=rates.price(row, opts.prices),
        sources={
            "peak": _peak_source(row, cores, clock, peak),
            "efficiency": eff.cite(),
            "network": _(
                "{nic:g} Gbps (catalog NetworkPerformance); {flow}; x {tcp}; "
                "never EFA: gloo has no EFA transport"
            ).format(nic=nic, flow=flow.cite(), tcp=rates.TCP_EFFICIENCY.cite()),
            "intra_node": local_bw.cite(),
            "memory": rates.DDR_GBYTES_PER_S_PER_CORE.cite(),
            "overlap": rates.OVERLAP["cpu"].cite(),
        },
    )


def _peak_source(row: InstanceRow, cores: int, clock: rates.Rate, peak: float) -> str:
    """Where a CPU node's peak comes from: the cores it is priced on (a pod's, of the node's) at the clock."""
    return (
        _(
            "{cores} cores (the pod's, of the node's {node_cores}) x {clock:g} GHz x {flop:,} bf16 "
            "FLOP/cycle (AMX) = {peak:.1f} TFLOPS, at {cite} (the catalog's {catalog} GHz is not "
            "used: the measured share is of this clock)"
        )
        if cores != row.cores
        else _(
            "{cores} cores x {clock:g} GHz x {flop:,} bf16 FLOP/cycle (AMX) = {peak:.1f} TFLOPS, at "
            "{cite} (the catalog's {catalog} GHz is not used: the measured share is of this clock)"
        )
    ).format(
        cores=cores,
        node_cores=row.cores,
        clock=clock.value,
        flop=AMX_BF16_FLOP_PER_CYCLE,
        peak=peak,
        cite=clock.cite(),
        catalog=row.clock_ghz,
    )


def _gpu_node(row: InstanceRow, opts: Options) -> Node:
    spec = rates.gpu_spec(row)
    eff = opts.gpu_efficiency or rates.GPU_STACKS[opts.stack]
    if opts.gpu_efficiency is None and opts.stack == "tuned-fp8" and spec.name not in rates.FP8_GPUS:
        eff = rates.GPU_STACKS["tuned-bf16"]  # no FP8 tensor cores: the same stack in bf16
    intra_link = LINKS[rates.GPU_INTRA_LINK.get(row.family, "pcie4")]
    host_link = LINKS[rates.GPU_HOST_LINK.get(row.family, "pcie4")]
    if row.efa and row.max_efa_interfaces:
        inter = rates.efa_gbytes_per_s(row)
        transport = _("NCCL over EFA: {n} devices, {gbps:g} Gbps ({perf}) x {eff:g}").format(
            n=row.max_efa_interfaces,
            gbps=rates.instance_gbps(row),
            perf=row.network_performance,
            eff=LINKS["efa"].efficiency,
        )
        latency = rates.LATENCY_S["efa"]
    else:
        inter = rates.instance_gbps(row) / 8 * LINKS["eni"].efficiency
        transport = _("NCCL sockets over ENA (no EFA): {gbps:g} Gbps x {eff:g}").format(
            gbps=rates.instance_gbps(row), eff=LINKS["eni"].efficiency
        )
        latency = rates.LATENCY_S["tcp"]
    return Node(
        name=row.instance_type,
        device="gpu",
        max_ranks=row.gpus,
        peak_tflops=spec.bf16_tflops,
        efficiency=eff,
        mem_gbytes_per_s=spec.hbm_gbytes_per_s,
        host_mem_gbytes_per_s=rates.DDR_GBYTES_PER_S_PER_CORE.value * row.cores,
        intra_gbytes_per_s=intra_link.effective_gbytes_per_s,
        intra_latency=rates.LATENCY_S["nvlink"],
        inter_gbytes_per_s=inter,
        inter_latency=latency,
        inter_transport=transport,
        pcie_gbytes_per_s=host_link.effective_gbytes_per_s,
        overlap=rates.OVERLAP["gpu"],
        usd_per_hour=rates.price(row, opts.prices),
        sources={
            "peak": spec.source,
            "efficiency": f"{opts.stack}: {eff.cite()}",
            "intra_node": f"{intra_link.name}: {intra_link.source} x {intra_link.efficiency:g}",
            # the row's own catalog entry, not another instance's data sheet (a p5en cited p4d's page)
            "network": transport
            + _(" (the EC2 catalog's network performance for {instance})").format(instance=row.instance_type),
            "pcie": host_link.source,
            "overlap": rates.OVERLAP["gpu"].cite(),
        },
    )


def node_for(row: InstanceRow, opts: Options, clock: rates.Rate | None = None) -> Node:
    """The estimator's Node for a catalog row; `clock` (CPU only): a known host's own clock (_cpu_node)."""
    return _gpu_node(row, opts) if row.gpus else _cpu_node(row, opts, clock)
