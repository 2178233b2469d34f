"""Every rate the cost planner uses, with where it came from: measured here, a data sheet, or a stated
assumption.

Kept apart from the estimator (workshop.plan.cost) so each number can be read, cited and challenged in one
place. Measured rates are read from benchmarks/results (chapter 01's GEMM, chapter 04's ceiling share,
chapter 06's gloo collective fit); assumptions are named and a `workshop plan` flag overrides each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.lang import N_, _
from workshop.paths import RESULTS_DIR
from workshop.plan.catalog import PRICE_SOURCE, InstanceRow, hourly_price
from workshop.plan.topology import DMA_EFFICIENCY, LINKS


@dataclass(frozen=True)
class Rate:
    """One number the estimate stands on, and why it is that number."""

    value: float
    unit: str
    kind: str  # "measured", "data sheet", "assumption", "price", "override"
    source: str

    def cite(self) -> str:
        return f"{self.value:g} {_(self.unit)} ({_(self.kind)}: {_(self.source)})"


# ---------------------------------------------------------------- GPUs (data sheets)


@dataclass(frozen=True)
class GpuSpec:
    name: str
    bf16_tflops: float  # dense, no sparsity
    hbm_gbytes_per_s: float
    source: str


GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in [
        GpuSpec(
            "A100 40GB",
            312.0,
            1555.0,
            "NVIDIA A100 datasheet: 312 TFLOPS dense BF16 tensor, 1,555 GB/s HBM2 (40GB SXM4)",
        ),
        GpuSpec(
            "A100 80GB",
            312.0,
            2039.0,
            "NVIDIA A100 datasheet: 312 TFLOPS dense BF16 tensor, 2,039 GB/s HBM2e (80GB SXM4)",
        ),
        GpuSpec(
            "H100",
            989.0,
            3350.0,
            "NVIDIA H100 SXM5 datasheet: 989 TFLOPS dense BF16 (1,979 with sparsity), 3.35 TB/s HBM3",
        ),
        GpuSpec(
            "L40S",
            362.0,
            864.0,
            "NVIDIA L40S datasheet: 362 TFLOPS BF16 tensor dense (733 with sparsity), 864 GB/s GDDR6",
        ),
        GpuSpec(
            "A10G",
            70.0,
            600.0,
            "APPROXIMATE: NVIDIA A10 datasheet 125 TFLOPS BF16 dense; AWS's A10G runs lower clocks, ~70 "
            "TFLOPS "
            "as commonly quoted; 600 GB/s GDDR6",
        ),
    ]
}


def gpu_spec(row: InstanceRow) -> GpuSpec:
    """The data sheet of the GPU the catalog names (A100 by its memory size)."""
    name = row.gpu_name or ""
    if name == "A100":
        name = "A100 80GB" if row.gpu_memory_gib > 60 else "A100 40GB"
    if name not in GPUS:
        raise WorkshopError(
            f"no data sheet for GPU {row.gpu_name!r} of {row.instance_type}; known: {', '.join(GPUS)}"
        )
    return GPUS[name]


# Which LINKS key the GPUs inside one instance talk over, and the host link offload copies cross.
GPU_INTRA_LINK = {"p4d": "nvlink3", "p4de": "nvlink3", "p5": "nvlink4", "g6e": "pcie4", "g5": "pcie4"}
GPU_HOST_LINK = {"p5": "pcie5"}  # others: pcie4
GPU_FAMILIES = tuple(GPU_INTRA_LINK)
CPU_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i")

# ---------------------------------------------------------------- networks (AWS documentation + assumptions)

FLOW_SOURCE = N_(
    "EC2 User Guide, 'Amazon EC2 instance network bandwidth': a single TCP flow (5-tuple) is limited to 5 "
    "Gbps "
    "outside a cluster placement group, 10 Gbps inside one; ENA Express raises one flow to 25 Gbps"
)
TCP_FLOW_GBPS = {"default": 5.0, "placement_group": 10.0, "ena_express": 25.0}
TCP_EFFICIENCY = Rate(
    0.9,
    N_("of line rate"),
    N_("assumption"),
    N_("large gloo messages over one TCP connection: headers and ACKs cost ~5-10%"),
)
EFA_GBPS_PER_DEVICE = 100.0  # LINKS["efa"]: 12.5 GB/s per EFA device
LATENCY_S = {
    "tcp": Rate(100e-6, N_("s per collective call"), N_("assumption"), N_("TCP round trip inside a VPC")),
    "efa": Rate(
        50e-6, N_("s per collective call"), N_("assumption"), N_("NCCL over EFA/libfabric, small message")
    ),
    "nvlink": Rate(
        50e-6, N_("s per collective call"), N_("assumption"), N_("NCCL inside one instance, kernel launch")
    ),
}
OVERLAP = {
    "cpu": Rate(
        0.0, N_("of comms hidden"), N_("assumption"), N_("gloo collectives block the cores that compute")
    ),
    "gpu": Rate(
        0.5, N_("of comms hidden"), N_("assumption"), N_("NCCL on its own stream, prefetch overlaps half")
    ),
}
GPU_MFU = Rate(
    0.5,
    N_("of dense bf16 peak"),
    N_("assumption"),
    N_("typical FSDP/ZeRO-3 7-8B training (MosaicML: 46-64%)"),
)

# ---------------------------------------------------------------- memory and the optimizer step

ADAM_BYTES_PER_PARAM = Rate(
    30.0,
    N_("bytes per parameter"),
    N_("assumption"),
    N_("Adam reads fp32 master, m, v, grad (16 B) and writes master, m, v, bf16 weight (14 B)"),
)
DDR_GBYTES_PER_S_PER_CORE = Rate(
    6.4,
    N_("GB/s per core"),
    N_("data sheet"),
    "Sapphire Rapids socket: 8 x DDR5-4800 x 8 B = 307 GB/s over 48 cores (2 sockets on a 48xlarge)",
)

# ---------------------------------------------------------------- measured here


def _read(name: str) -> dict:
    path = Path(RESULTS_DIR) / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WorkshopError(f"{path}: cannot read measured rates ({exc})") from None


def cpu_efficiency() -> Rate:
    """Model FLOP rate of a training step over the AMX peak: chapter 04's share of the GEMM ceiling x chapter
    01's GEMM over peak, both measured on the AMX host (ceiling.json, gemm.json)."""
    ceiling, gemm = _read("ceiling.json"), _read("gemm.json")
    share = ceiling["targets"]["step_pct_of_ceiling"]["recipe"] / 100
    gemm_pct = gemm["bf16_pct_of_peak"] / 100
    return Rate(
        share * gemm_pct,
        N_("of AMX bf16 peak"),
        N_("measured"),
        _(
            "chapter 04: step = {share:.0%} of the GEMM ceiling (ceiling.json, {date}) x "
            "chapter 01: GEMM = {gemm:.0%} of AMX peak (gemm.json, n={n})"
        ).format(share=share, date=ceiling["machine"]["date"], gemm=gemm_pct, n=gemm["bf16_size"]),
    )


def gloo_local_fit() -> tuple[Rate, Rate]:
    """Chapter 06's gloo collective fit on one host (comms.json): (all-gather GB/s, latency per call)."""
    fit = _read("comms.json")["bench"]["fit"]["all_gather"]
    where = N_("chapter 06's gloo all-gather fit on one 2-core host (comms.json)")
    return (
        Rate(fit["gbytes_per_s"], "GB/s", N_("measured"), where),
        Rate(fit["alpha_s"], N_("s per collective call"), N_("measured"), where),
    )


def tcp_flow_gbps(placement_group: bool, ena_express: bool) -> Rate:
    key = "ena_express" if ena_express else "placement_group" if placement_group else "default"
    label = {
        "default": N_("outside a placement group"),
        "placement_group": N_("inside a cluster placement group"),
    }
    return Rate(
        TCP_FLOW_GBPS[key],
        N_("Gbps per TCP flow"),
        N_("data sheet"),
        f"{_(label.get(key, 'ENA Express'))}: {_(FLOW_SOURCE)}",
    )


def instance_gbps(row: InstanceRow) -> float:
    """The instance's network bandwidth from the catalog's 'NetworkPerformance' ('Up to 12.5 Gigabit' -> 12.5,
    '4x 100 Gigabit' -> 400); 'up to' is a burst, the baseline is lower (stated, not modelled)."""
    text = row.network_performance.replace("Up to", "").replace("Gigabit", "").strip()
    if "x" in text:
        n, each = text.split("x", 1)
        return float(n) * float(each)
    try:
        return float(text)
    except ValueError:
        raise WorkshopError(
            f"{row.instance_type}: cannot read network performance {row.network_performance!r}"
        ) from None


def efa_gbytes_per_s(row: InstanceRow) -> float:
    """Effective EFA bandwidth of one instance: its EFA devices x 100 Gbps x the DMA efficiency (topology)."""
    return row.max_efa_interfaces * LINKS["efa"].gbytes_per_s * DMA_EFFICIENCY


# ---------------------------------------------------------------- prices

PRE_CUT_SOURCE = N_(
    "aws.amazon.com/ec2/pricing/on-demand, us-east-1 Linux, as published 2024 (BEFORE AWS cut P4/P5 "
    "on-demand "
    "prices by up to 45% in June 2025): check the page, pass --price TYPE=USD"
)
# Published us-east-1 on-demand prices the catalog does not carry; dated (see PRE_CUT_SOURCE).
LIST_PRICES = {
    "p4de.24xlarge": 40.96575,
    "p5.48xlarge": 98.32,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.4xlarge": 1.624,
    "g5.8xlarge": 2.448,
    "g5.12xlarge": 5.672,
    "g5.16xlarge": 4.096,
    "g5.24xlarge": 8.144,
    "g5.48xlarge": 16.288,
    "g6e.2xlarge": 2.24208,
    "g6e.4xlarge": 3.00424,
    "g6e.8xlarge": 4.52856,
    "g6e.12xlarge": 10.49264,
    "g6e.16xlarge": 7.57719,
    "g6e.24xlarge": 15.06559,
    "g6e.48xlarge": 30.13118,
}


def price(row: InstanceRow, overrides: dict[str, float] | None = None) -> Rate | None:
    """USD per instance-hour: an override, the catalog's price, or the dated list above; None if unknown."""
    if overrides and row.instance_type in overrides:
        return Rate(overrides[row.instance_type], "USD/h", N_("override"), "--price")
    usd = hourly_price(row.instance_type, row.vcpus)
    if usd is not None:
        cut = _(" (P4d: before the June 2025 cut of up to 45%)") if row.family.startswith("p4") else ""
        return Rate(usd, "USD/h", N_("price"), PRICE_SOURCE + cut)
    if row.instance_type in LIST_PRICES:
        return Rate(LIST_PRICES[row.instance_type], "USD/h", N_("price"), PRE_CUT_SOURCE)
    return None


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """['p5.48xlarge=55.04', ...] -> {type: USD}; a malformed item is an error naming it."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            usd = float(value)
        except ValueError:
            usd = -1.0
        if not sep or "." not in name or usd <= 0:
            raise WorkshopError(f"bad --price {item!r}; use TYPE=USD per hour, e.g. p5.48xlarge=55.04")
        out[name] = usd
    return out
