"""Facts the chapter-06 model stands on: link bandwidths (with sources), GPU instances, and the original
workshop's runs.

Kept apart from the model (workshop.experiments.comms) so that every number a prediction uses can be read,
cited and challenged in one place. Line rates are published figures; each link's `efficiency` is a STATED
assumption (the fraction of line rate a large NCCL message reaches), never fitted to the original workshop's
table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workshop.errors import WorkshopError, check_choice
from workshop.lang import N_
from workshop.plan.knobs import Knobs
from workshop.plan.models import SEQ_LEN

GB = 1e9  # bandwidths and bytes in decimal GB, as vendors publish them


@dataclass(frozen=True)
class Link:
    """One kind of wire between two ranks, as NCCL would use it."""

    name: str
    gbytes_per_s: float  # line rate, per direction, GB/s
    efficiency: float  # stated fraction of line rate reached by large messages
    transport: str  # the NCCL transport string this link shows up as in NCCL_DEBUG=INFO
    source: str
    note: str = ""

    @property
    def effective_gbytes_per_s(self) -> float:
        return self.gbytes_per_s * self.efficiency


# Large-message NCCL bus bandwidth usually lands near 80% of line rate on NVLink, PCIe DMA and RDMA NICs:
# one stated number for every DMA-class link (no per-topology tuning).
DMA_EFFICIENCY = 0.8
# NCCL's socket transport stages every chunk through host memory and the kernel TCP stack (on ENA it opens
# 2 threads x 8 sockets per peer); it is CPU-bound far below the NIC. Stated, not fitted.
SOCKET_EFFICIENCY = 0.2

LINKS: dict[str, Link] = {
    k.name: k
    for k in [
        Link(
            "nvlink3",
            300.0,
            DMA_EFFICIENCY,
            "P2P/CUMEM (NVLink)",
            "NVIDIA A100 datasheet: third-generation NVLink, 600 GB/s per GPU (both directions) via NVSwitch",
        ),
        Link(
            "nvlink4",
            450.0,
            DMA_EFFICIENCY,
            "P2P/CUMEM (NVLink)",
            "NVIDIA H100 SXM datasheet: fourth-generation NVLink, 900 GB/s per GPU (both directions)",
        ),
        Link(
            "pcie4",
            31.5,
            DMA_EFFICIENCY,
            "P2P/CUMEM or SHM (PCIe)",
            "PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b encoding = 31.5 GB/s per direction",
        ),
        Link(
            "pcie5",
            63.0,
            DMA_EFFICIENCY,
            "P2P/CUMEM or SHM (PCIe)",
            "PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b encoding = 63 GB/s per direction",
        ),
        Link(
            "efa",
            12.5,
            DMA_EFFICIENCY,
            "NET/Libfabric/GDRDMA",
            "AWS EC2 p4d page: 400 Gbps = 4 x 100 Gbps EFA per instance; one 100 Gbps EFA = 12.5 GB/s",
            "per EFA device; a pod gets as many as its vpc.amazonaws.com/efa request",
        ),
        Link(
            "eni",
            12.5,
            SOCKET_EFFICIENCY,
            "NET/Socket",
            "ENA network card: 100 Gbps line rate; NCCL net_socket.cc uses 2 threads x 8 sockets on ENA",
            "TCP through host memory; AWS caps a single TCP flow at 5 Gbps (10 inside a cluster placement "
            "group)",
        ),
    ]
}


def link(name: str) -> Link:
    """The Link named `name` from LINKS (bandwidth in GB/s and its efficiency, with the source); an unknown
    name is a WorkshopError naming the known ones."""
    check_choice("link", name, LINKS)
    return LINKS[name]


@dataclass(frozen=True)
class GpuInstance:
    name: str
    gpu: str
    gpus: int
    intra_link: str  # what GPUs inside one pod talk over (key of LINKS)
    pcie: str  # the host <-> GPU link that CPU offload uses
    efa_devices: int
    network_gbps: int
    vcpus: int
    memory_gib: int
    source: str
    note: str = ""


INSTANCES: dict[str, GpuInstance] = {
    i.name: i
    for i in [
        GpuInstance(
            "p4d.24xlarge",
            "A100 40GB SXM4",
            8,
            "nvlink3",
            "pcie4",
            4,
            400,
            96,
            1152,
            "aws.amazon.com/ec2/instance-types/p4/",
        ),
        GpuInstance(
            "p5.48xlarge",
            "H100 80GB SXM5",
            8,
            "nvlink4",
            "pcie5",
            32,
            3200,
            192,
            2048,
            "aws.amazon.com/ec2/instance-types/p5/",
        ),
        GpuInstance(
            "g6e.48xlarge",
            "L40S 48GB",
            8,
            "pcie4",
            "pcie4",
            4,
            400,
            192,
            1536,
            "aws.amazon.com/ec2/instance-types/g6e/",
            "no NVLink: GPUs inside a pod talk over PCIe; EFA device count as listed by "
            "describe-instance-types (verify in your region)",
        ),
    ]
}


def instance(name: str) -> GpuInstance:
    check_choice("GPU instance type", name, INSTANCES)
    return INSTANCES[name]


ORIGINAL_003 = N_("the original workshop's chapter 003 (p4d.24xlarge table, NCCL_DEBUG transports)")
NOT_IN_ORIGINAL = N_(
    "not in the original workshop chapters (chapter 003 tables p4d only and leaves its ENI row '???'): a "
    "timing from the workbook's brief, not reproducible from the original workshop"
)


@dataclass(frozen=True)
class OriginalRun:
    """One row of the original workshop's table: Llama-3-8B, ZeRO-3 with CPU offload, 50 optimizer steps, 4
    GPUs."""

    instance: str
    pods: int
    gpus_per_pod: int
    wall: str  # h:mm:ss as the original workshop printed it
    network: (
        str | None
    )  # LINKS key between pods; None for a single pod; "unrecorded" if the original workshop did not say
    transport: str  # what NCCL_DEBUG printed, or "not recorded"
    retest: bool = False
    note: str = ""
    source: str = ORIGINAL_003

    @property
    def seconds(self) -> int:
        h, m, s = (int(x) for x in self.wall.split(":"))
        return 3600 * h + 60 * m + s

    @property
    def label(self) -> str:
        if self.pods == 1 or self.network is None:  # None only on a single pod (see `network`)
            net = ""
        else:
            net = f" + {self.network.upper() if self.network != 'unrecorded' else '?'}"
        return f"{self.instance} {self.pods} pod x {self.gpus_per_pod} GPU{net}"


ORIGINAL_STEPS = 50
ORIGINAL_RUNS: list[OriginalRun] = [
    OriginalRun("p4d.24xlarge", 1, 4, "0:16:21", None, "P2P/CUMEM/read"),
    OriginalRun("p4d.24xlarge", 4, 1, "0:39:32", "efa", "NET/Libfabric/0/GDRDMA", note="1 EFA of 4 per pod"),
    OriginalRun(
        "p4d.24xlarge", 4, 1, "1:20:29", "eni", "NET/Socket", note="no EFA requested", source=NOT_IN_ORIGINAL
    ),
    OriginalRun("g6e.48xlarge", 1, 4, "0:38:32", None, "not recorded", source=NOT_IN_ORIGINAL),
    OriginalRun("g6e.48xlarge", 4, 1, "2:09:40", "unrecorded", "not recorded", source=NOT_IN_ORIGINAL),
    OriginalRun("p5.48xlarge", 1, 4, "0:20:06", None, "not recorded", retest=True, source=NOT_IN_ORIGINAL),
    OriginalRun(
        "p5.48xlarge", 4, 1, "1:06:09", "unrecorded", "not recorded", retest=True, source=NOT_IN_ORIGINAL
    ),
]


@dataclass(frozen=True)
class OriginalWorkload:
    """What every run of the original workshop trained (the original workshop's chapter 003's DeepSpeed and
    Trainer settings)."""

    model: str = "llama-3-8b"
    params: int = 8_030_261_248  # the Trainer's "Number of trainable parameters"
    world: int = 4
    grad_accum: int = 4
    bytes_per_param: int = 2  # bf16
    # the job's knobs as the original ran them (declared in Knobs, set here): the fine-tune's recipe
    # (wikitext-2, seq 512, lr 2e-5, warm-up 10), ZeRO-3 with both offloads and activation checkpointing,
    # micro-batch 1, one checkpoint at its 50th and last step
    knobs: Knobs = Knobs(
        dataset="wikitext",
        seq_len=SEQ_LEN,
        micro_batch=1,
        precision="bf16",
        zero_stage=3,
        offload_optimizer=True,
        offload_param=True,
        grad_ckpt=True,
        save_steps=50,
        lr=2e-5,
        warmup_steps=10,
    )
    reduce_bucket_size: float = 5e7
    prefetch_bucket_size: float = 5e7
    max_live_parameters: float = 1e8
    env: dict = field(default_factory=lambda: {"NCCL_P2P_LEVEL": "NVL"})


CONFOUNDERS: list[str] = [
    N_(
        "CPU offload of parameters and optimizer: the step is dominated by host work (CPU Adam, PCIe "
        "copies), so a faster GPU barely helps (p5's single pod is slower than p4d's)."
    ),
    N_(
        "Only 1 of the instance's EFA devices per pod in the 4-pod runs (p4d has 4): "
        "100 Gbps per rank, not 400."
    ),
    N_("Pod placement was not recorded: 4 one-GPU pods may share one node (shared CPU and memory) or not."),
    N_(
        "Script version: the original workshop's training script changed between runs; "
        "sequence length is not recorded."
    ),
    N_(
        "The transport of the g6e and p5 multi-pod runs was not recorded (EFA or plain ENI); "
        "p5 is marked for retest."
    ),
]


# ---------------------------------------------------------------- link rates as tc writes them

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)$")


_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}


UNCAPPED = ("none", "unlimited")


def parse_rate(rate: str) -> int | None:
    """'10gbit' -> 10_000_000_000 bits/s (tc's units, decimal); 'none'/'unlimited' -> None (no cap)."""
    text = str(rate).strip().lower()
    if text in UNCAPPED:
        return None
    m = _RATE.match(text)
    if not m or float(m.group(1)) <= 0:
        raise WorkshopError(f"bad rate {rate!r}; use a tc rate such as 10gbit, 1gbit, 500mbit, or 'none'")
    return int(float(m.group(1)) * _UNITS[m.group(2)])
