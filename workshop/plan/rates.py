"""Every rate the cost planner uses, with where it came from: measured here, a data sheet, or a stated
assumption.

Kept apart from the estimator (workshop.plan.cost) so each number can be read, cited and challenged in one
place. Measured rates are read from benchmarks/results (chapter 01's GEMM, chapter 04's slice and ceiling,
chapter 06's gloo collective fit); assumptions are named and a `workshop plan` flag overrides each. The CPU
rate's calibration file (the slice by default, or chapter 04's ceiling) is read, checked and carried to AMX
in workshop.plan.calibration.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.lang import N_, _
from workshop.paths import RESULTS_DIR
from workshop.plan.catalog import InstanceRow, aws_price, has_aws_credentials, known_types, price_of
from workshop.plan.topology import DMA_EFFICIENCY
from workshop.plan.traffic import HIDDEN_WHEN_OVERLAPPED, OVERLAP_COMM


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
            "H200",
            989.0,
            4800.0,
            "NVIDIA H200 SXM datasheet: 989 TFLOPS dense BF16 (the H100's compute), 4.8 TB/s HBM3e, 141 GB",
        ),
        GpuSpec(
            "H100 PCIe",
            756.0,
            2000.0,
            "NVIDIA H100 PCIe datasheet: 1,513 TFLOPS BF16 with sparsity (756 dense), 2 TB/s HBM2e",
        ),
        GpuSpec(
            "L4",
            121.0,
            300.0,
            "NVIDIA L4 datasheet: 242 TFLOPS BF16 with sparsity (121 dense), 300 GB/s GDDR6",
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
            "APPROXIMATE: NVIDIA A10 datasheet 125 TFLOPS BF16 dense; AWS's A10G runs lower clocks, "
            "~70 TFLOPS as commonly quoted; 600 GB/s GDDR6",
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


def gpu_by_device_name(device_name: str) -> GpuSpec | None:
    """The data sheet of a GPU by the name its driver reports ("NVIDIA H100 80GB HBM3", "NVIDIA L4"): the
    entry all of whose words are in that name, the most specific first; None for an unknown GPU."""
    words = set(re.split(r"[^a-z0-9]+", device_name.lower()))
    hits = [g for g in GPUS.values() if set(g.name.lower().split()) <= words]
    return max(hits, key=lambda g: len(g.name.split()), default=None)


# Which LINKS key the GPUs inside one instance talk over, and the host link offload copies cross.
GPU_INTRA_LINK = {
    "p4d": "nvlink3",
    "p4de": "nvlink3",
    "p5": "nvlink4",
    "p5en": "nvlink4",
    "g6e": "pcie4",
    "g5": "pcie4",
}
GPU_HOST_LINK = {"p5": "pcie5", "p5en": "pcie5"}  # others: pcie4
GPU_FAMILIES = tuple(GPU_INTRA_LINK)
CPU_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i")

# ---------------------------------------------------------------- networks (AWS documentation + assumptions)

FLOW_SOURCE = N_(
    "EC2 User Guide, 'Amazon EC2 instance network bandwidth': a single TCP flow (5-tuple) is limited to "
    "5 Gbps outside a cluster placement group, 10 Gbps inside one; ENA Express raises one flow to 25 Gbps"
)
TCP_FLOW_GBPS = {"default": 5.0, "placement_group": 10.0, "ena_express": 25.0}
TCP_EFFICIENCY = Rate(
    0.9,
    N_("of line rate"),
    N_("assumption"),
    N_("large gloo messages over one TCP connection: headers and ACKs cost ~5-10%"),
)
LATENCY_S = {
    "tcp": Rate(100e-6, N_("s per collective call"), N_("assumption"), N_("TCP round trip inside a VPC")),
    "efa": Rate(
        50e-6, N_("s per collective call"), N_("assumption"), N_("NCCL over EFA/libfabric, small message")
    ),
    "nvlink": Rate(
        50e-6, N_("s per collective call"), N_("assumption"), N_("NCCL inside one instance, kernel launch")
    ),
}
# the share of comms hidden, from the one overlap_comm constant the training config also sets (traffic.py)
OVERLAP = {
    "cpu": Rate(
        HIDDEN_WHEN_OVERLAPPED if OVERLAP_COMM["cpu"] else 0.0,
        N_("of comms hidden"),
        N_("assumption"),
        N_("gloo collectives block the cores that compute"),
    ),
    "gpu": Rate(
        HIDDEN_WHEN_OVERLAPPED if OVERLAP_COMM["gpu"] else 0.0,
        N_("of comms hidden"),
        N_("assumption"),
        N_("NCCL on its own stream, prefetch overlaps half"),
    ),
}
GPU_MFU = Rate(
    0.40,
    N_("of dense bf16 peak"),
    N_("assumption"),
    N_(
        "the workbook's stack (HF transformers with SDPA attention + DeepSpeed ZeRO, bf16, full recompute "
        "off) below the tuned stacks' 0.55 (read from MosaicML llm-foundry MPT-7B with FSDP and flash "
        "attention and torchtitan Llama 3 8B: costcheck's in-sample rows); no GPU run here has measured it "
        "yet"
    ),
)
# Model FLOP rate per stack and precision, as a fraction of the dense bf16 peak (the planner's --stack).
GPU_STACKS: dict[str, Rate] = {
    "hf-deepspeed-bf16": GPU_MFU,
    "tuned-bf16": Rate(
        0.55,
        N_("of dense bf16 peak"),
        N_("published"),
        "FSDP stacks with flash attention on 7-8B: MosaicML llm-foundry MPT-7B 40-46% on H100, 47-60% on "
        "A100 (scripts/train/benchmarking/README.md, commit 061f2c7); torchtitan Llama 3 8B 57-58% on 64 "
        "A100 (docs/performance.md); Megatron/NeMo 50-60%",
    ),
    "tuned-fp8": Rate(
        0.55 * 1.4,
        N_("of dense bf16 peak"),
        N_("published"),
        "FP8 recipes (Transformer Engine, torchao float8) train 1.4-1.8x faster than the same stack's bf16 "
        "on H100/H200 (NVIDIA NeMo performance summary; torchtitan docs/float8.md); the low end, x 1.4; GPUs "
        "without FP8 (A100, A10G) fall back to tuned-bf16",
    ),
}
FP8_GPUS = ("H100", "H200", "L40S")

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


def read_measured(name: str) -> dict:
    """A stored result of benchmarks/results/ (comms.json, netsim.json, ceiling.json) as a dict."""
    path = Path(RESULTS_DIR) / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise WorkshopError(f"{path}: cannot read measured rates ({exc})") from None


CPU_ENGINES = {"deepspeed": "zero3", "ddp-compile": "recipe"}  # engine -> chapter 04's ceiling lever


def gloo_local_fit() -> tuple[Rate, Rate]:
    """Chapter 06's gloo collective fit on one host (comms.json): (all-gather GB/s, latency per call)."""
    fit = read_measured("comms.json")["bench"]["fit"]["all_gather"]
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
    """Effective EFA bandwidth of one instance, GB/s: its network bandwidth from the catalog (all of it EFA on
    the EFA instances: p4d 4 x 100, p5 32 x 100, p5en 16 x 200 Gbps) x the DMA efficiency (topology). Counting
    devices x 100 Gbps would halve p5en's EFA v3."""
    return instance_gbps(row) / 8 * DMA_EFFICIENCY


# ---------------------------------------------------------------- prices


def price(
    row: InstanceRow, overrides: dict[str, float] | None = None, source: str | None = None
) -> Rate | None:
    """USD per instance-hour: an override, the AWS Price List API (with credentials, not under moto), or the
    dated table (catalog.PRICES); None if unknown. The Rate's kind says which ("override" is marked)."""
    if overrides and row.instance_type in overrides:
        return Rate(overrides[row.instance_type], "USD/h", N_("override"), "--price")
    if source != "moto" and (source == "aws" or has_aws_credentials()):
        try:
            live = aws_price(row.instance_type)
        except Exception:  # noqa: BLE001 - no pricing permission or no network: the dated table answers
            live = None
        if live is not None:
            return Rate(live.usd, "USD/h", N_("price"), f"{live.date}: {live.source}")
    got = price_of(row.instance_type, row.vcpus)
    if got is None:
        return None
    return Rate(got.usd, "USD/h", N_("price"), f"{got.date}: {got.source}")


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """['p5.48xlarge=55.04', ...] -> {type: USD}; a malformed item is an error naming it."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            usd = float(value)
        except ValueError:
            usd = -1.0
        if not sep or "." not in name or not (1e-3 <= usd <= 1e4):  # options.LIMITS["price"]
            raise WorkshopError(
                f"bad --price {item!r}; use TYPE=USD per hour in [0.001, 10000], e.g. p5.48xlarge=55.04"
            )
        if name not in known_types():
            close = difflib.get_close_matches(name, known_types(), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise WorkshopError(f"--price {item!r}: unknown instance type {name!r}{hint}")
        out[name] = usd
    return out


# ---------------------------------------------------------------- fixed costs of a run (each a flag)

KARPENTER_LAUNCH_S = 90.0  # assumption: EC2 launch to node Ready under Karpenter, typical for on-demand
IMAGE_PULL_GBYTES_PER_S = 0.05  # assumption: ECR pull and unpack on a fresh node


def startup_s() -> Rate:
    """Seconds from "node requested" to "first step": launch + image pull + the first step's one-off work,
    from benchmarks/results/image.json when the image benchmark wrote it, else the stated default."""
    path = Path(RESULTS_DIR) / "image.json"
    try:
        image = json.loads(path.read_text())
        pull = image["compressed_bytes"] / 1e9 / IMAGE_PULL_GBYTES_PER_S
        value = KARPENTER_LAUNCH_S + pull + float(image["first_step_s"])
        where = _(
            "the CPU image's {mib:,.0f} MiB (measured) pulled at {pull:g} GB/s (assumed) + its first step "
            "{first:g} s (measured: image.json, {machine}, {date}); GPU nodes pull a larger image, never "
            "measured here, so theirs is a lower bound"
        ).format(
            mib=image["compressed_bytes"] / 2**20,
            pull=IMAGE_PULL_GBYTES_PER_S,
            first=image["first_step_s"],
            machine=image.get("measured_on", "?"),
            date=image.get("date", "?"),
        )
        kind = "assumption"
    except (OSError, ValueError, KeyError, TypeError):
        value = KARPENTER_LAUNCH_S + 675 * 2**20 / 1e9 / IMAGE_PULL_GBYTES_PER_S + 25.0
        where = _(
            "default: the CPU image (~675 MiB compressed) pulled at 0.05 GB/s (~14 s) + DeepSpeed's shm op "
            "compiled at the first step (~25 s); no benchmarks/results/image.json yet"
        )
        kind = "assumption"
    return Rate(
        value,
        N_("s per node"),
        kind,
        _("Karpenter launch to Ready ~{launch:g} s (assumed) + {where}").format(
            launch=KARPENTER_LAUNCH_S, where=where
        ),
    )


DOWNLOAD_GBYTES_PER_S = Rate(
    0.5,
    N_("GB/s per node"),
    N_("assumption"),
    N_("weights from S3 or the Hub over one node's NIC (~4 Gbit/s)"),
)
INIT_S = Rate(
    60.0,
    "s",
    N_("assumption"),
    N_("process groups, ZeRO partitioning and the DeepSpeed engine build before step 1"),
)


@dataclass(frozen=True)
class StorageSpec:
    """Where checkpoints go: its write rate, its price, and the least capacity it bills."""

    gbytes_per_s: Rate
    usd_per_gb_month: Rate
    min_gb: float


STORAGE = {
    "fsx": StorageSpec(
        Rate(
            0.24,
            "GB/s",
            N_("data sheet"),
            N_("FSx for Lustre SCRATCH_2, 1.2 TiB: 200 MB/s per TiB baseline (bursts higher)"),
        ),
        Rate(0.14, "USD/GB-month", "price", "FSx for Lustre SCRATCH_2, us-east-1, 2025"),
        1200.0,
    ),
    "s3": StorageSpec(
        Rate(
            1.0,
            "GB/s",
            N_("assumption"),
            N_("S3 multipart writes from the nodes (per-prefix limits ignored)"),
        ),
        Rate(0.023, "USD/GB-month", "price", "S3 Standard, us-east-1, 2025"),
        0.0,
    ),
}
# Where the FSx price is published, and the hours of a billed GB-month (teardown prices file systems per hour)
FSX_PRICE_URL = "aws.amazon.com/fsx/lustre/pricing"
HOURS_PER_MONTH = 730  # AWS turns a monthly price into an hourly one over 730 hours (8,760 a year / 12)
CHECKPOINT_MINUTES = 30.0  # only with --checkpoint-minutes (default: options.CHECKPOINT_SHARE of wall time)
