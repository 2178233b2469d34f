"""The planner's estimate of a run on THIS machine: the same step formula (estimate.step_terms) with a node
built from this CPU's own cores, clock and matmul path, so a measured slice can be put beside the prediction.

Why: chapter 01 prices 96-core hosts with one CPU rate; the only way to know whether that formula is honest
is to let it predict something measured here, on the real model's shapes, and print the ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from workshop.errors import WorkshopError
from workshop.plan import rates
from workshop.plan.estimate import Candidate, Step, step_terms
from workshop.plan.hardware import Detection, machine_peaks
from workshop.plan.models import Architecture
from workshop.plan.nodes import Node


@dataclass(frozen=True)
class HerePrediction:
    """What the planner says one optimizer step of `job` takes here, and every rate it used."""

    step: Step
    tokens_per_s: float
    peak_tflops: float
    peak_path: str
    clock_ghz: float
    efficiency: rates.Rate
    sources: dict[str, str]

    def as_dict(self) -> dict:
        s = self.step
        return {
            "tokens_per_s": self.tokens_per_s,
            "step_s": s.total,
            "compute_s": s.compute,
            "comm_s": s.comm,
            "optimizer_s": s.optimizer,
            "flops_per_token": s.flops_per_token,
            "peak_tflops": self.peak_tflops,
            "peak_path": self.peak_path,
            "clock_ghz": self.clock_ghz,
            "efficiency": self.efficiency.value,
            "sources": self.sources,
        }


def node_here(d: Detection, cores: int, precision: str, efficiency: rates.Rate) -> tuple[Node, str]:
    """This machine as the estimator's Node: the peak of the matmul path `precision` runs on over `cores`
    cores at the detected clock, DDR per core from the planner's rate, chapter 06's gloo fit for collectives.
    """
    peaks = machine_peaks(d, cores=min(cores, d["cores"]))
    peak = peaks["bf16"] if precision == "bf16" else peaks["fp32"]
    if peak is None:
        raise WorkshopError(
            f"no {precision} peak for {d['cpu_model']}: its clock is unknown ({d.get('clock_source')})"
        )
    local_bw, local_lat = rates.gloo_local_fit()
    ddr = rates.DDR_GBYTES_PER_S_PER_CORE.value * peak.cores
    node = Node(
        name="this machine",
        device="cpu",
        max_ranks=d["cores"],
        peak_tflops=peak.tflops,
        efficiency=efficiency,
        mem_gbytes_per_s=ddr,
        host_mem_gbytes_per_s=ddr,
        intra_gbytes_per_s=local_bw.value,
        intra_latency=local_lat,
        inter_gbytes_per_s=local_bw.value,
        inter_latency=local_lat,
        inter_transport="none (one host)",
        pcie_gbytes_per_s=None,
        overlap=rates.OVERLAP["cpu"],
        usd_per_hour=None,
    )
    return node, (
        f"{peak.cores} cores x {peak.clock_ghz:g} GHz ({d['clock_source']}) x {peak.flops_per_cycle} "
        f"{precision} FLOP/cycle ({peak.path}: {peak.assumption}) = {peak.tflops:.3f} TFLOPS"
    )


def predict_here(
    d: Detection, arch: Architecture, job: Candidate, cores: int, efficiency: rates.Rate
) -> HerePrediction:
    """The planner's step for `job` on this machine (estimate.step_terms, the formula every CPU plan uses)."""
    node, peak_src = node_here(d, cores, job.precision, efficiency)
    step = step_terms(node, job, arch)
    return HerePrediction(
        step,
        job.tokens_per_step / step.total,
        node.peak_tflops,
        peak_src,
        float(d["clock_ghz"] or 0),
        efficiency,
        {
            "peak": peak_src,
            "efficiency": efficiency.cite(),
            "optimizer": f"{rates.ADAM_BYTES_PER_PARAM.cite()} over {rates.DDR_GBYTES_PER_S_PER_CORE.cite()}",
            "collectives": rates.gloo_local_fit()[0].cite(),
            "overlap": rates.OVERLAP["cpu"].cite(),
        },
    )
