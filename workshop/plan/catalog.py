"""EC2 instance types as rows a planner can use: cores, memory, EFA, GPUs, and whether the CPU has AMX.

The same boto3 paginator answers from AWS when credentials exist, and otherwise from the real EC2 catalog
that moto ships (under `mock_aws`), so the chapter runs offline and always says which source answered.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import json
import os
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TypedDict, cast

from workshop.errors import WorkshopError, check_choice
from workshop.lang import N_, _
from workshop.plan.hardware import AMX_BF16_FLOP_PER_CYCLE

# The original workshop's query: every "7i" type with EFA (the cluster's inter-node fabric).
ORIGINAL_FILTERS = [
    {"Name": "instance-type", "Values": ["*7i*"]},
    {"Name": "network-info.efa-supported", "Values": ["true"]},
]
CPU_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i")
GPU_FAMILIES = ("p4d", "p5", "g6e")
DEFAULT_FAMILIES = CPU_FAMILIES + GPU_FAMILIES
SOURCES = ("auto", "aws", "moto")
DEFAULT_REGION = "us-east-1"

# One price table for the catalog view and the cost planner alike: us-east-1 Linux on-demand USD/hour, each
# row with the date it was read and where. Anything not here is None ("unknown"), never a guess. c7i/m7i/r7i
# price every size (metal included) linearly per vCPU, so one rate per family covers them.
_ONDEMAND = "aws.amazon.com/ec2/pricing/on-demand (us-east-1, Linux)"
_CUT = (
    "AWS What's New 2025-06-05, 'up to 45% price reduction for NVIDIA GPU-accelerated EC2 instances' "
    "(P4d, P4de, P5, P5en on-demand); " + _ONDEMAND
)


@dataclass(frozen=True)
class Price:
    """One hourly price and where it came from."""

    usd: float
    date: str  # when the figure was read or took effect
    source: str

    def cite(self) -> str:
        return f"${self.usd:g}/h ({self.date}: {self.source})"


# The 8th-gen Intel (Xeon 6, Granite Rapids) rates were not read from AWS here (no network): each cites the
# public page it was read from, with that page's date; they are 1.05x the 7th-gen rate per vCPU, as published.
_KARPENTER_8I = (
    "kubernetes-sigs/karpenter designs/consolidation-cost-threshold.md, 'On-demand price calibration "
    "(December 2025, us-east-1)'"
)
_PER_VCPU = {  # one size's published price / its vCPUs: every non-metal size of the family is linear in vCPUs
    "c7i": Price(0.08925 / 2, "2025-01", _ONDEMAND + ": c7i.large $0.08925"),
    "m7i": Price(0.1008 / 2, "2025-01", _ONDEMAND + ": m7i.large $0.1008"),
    "r7i": Price(0.1323 / 2, "2025-01", _ONDEMAND + ": r7i.large $0.1323"),
    "c8i": Price(
        8.99616 / 192,
        "2026-07",
        "c8i.48xlarge $8.99616 in the AWS Price List bulk API (us-east-1, Linux, shared, version "
        "20260728175247, as transcribed by a public EFA pricing analysis); c8i.xlarge $0.1874 in "
        + _KARPENTER_8I,
    ),
    "m8i": Price(
        0.4234 / 8,
        "2025-12",
        "m8i.2xlarge $0.4234 (m8i.large $0.1058, m8i.xlarge $0.2117) in " + _KARPENTER_8I + "; m8i.xlarge "
        "$0.212 on cloudinvent.co (2026-06-26, read from the AWS on-demand page in April 2026)",
    ),
    "r8i": Price(0.2778 / 4, "2025-12", "r8i.xlarge $0.2778 in " + _KARPENTER_8I),
}
# Bare-metal sizes are priced on their own by AWS (not always the per-vCPU rate of the family) and no
# published figure was read for them here: the table names them unpriced ("?") rather than guess.
UNPRICED_METAL = N_(
    "bare-metal size: AWS prices it separately and no published price was read here; --price TYPE=USD"
)
PRICES: dict[str, Price] = {
    "p5.48xlarge": Price(55.04, "2025-06", _CUT),
    "p5.4xlarge": Price(
        6.88, "2025-08", "AWS launch of p5.4xlarge (1 x H100), 1/8 of p5.48xlarge; " + _ONDEMAND
    ),
    "p5en.48xlarge": Price(63.296, "2025-06", _CUT + " (as listed by instances.vantage.sh)"),
    "p4d.24xlarge": Price(21.96, "2025-06", _CUT),
    "p4de.24xlarge": Price(27.45, "2025-06", _CUT),
    "g6e.xlarge": Price(1.861, "2025-01", _ONDEMAND),
    "g6e.2xlarge": Price(2.24208, "2025-01", _ONDEMAND),
    "g6e.4xlarge": Price(3.00424, "2025-01", _ONDEMAND),
    "g6e.8xlarge": Price(4.52856, "2025-01", _ONDEMAND),
    "g6e.12xlarge": Price(10.49264, "2025-01", _ONDEMAND),
    "g6e.16xlarge": Price(7.57719, "2025-01", _ONDEMAND),
    "g6e.24xlarge": Price(15.06559, "2025-01", _ONDEMAND),
    "g6e.48xlarge": Price(30.13118, "2025-01", _ONDEMAND),
    "g5.xlarge": Price(1.006, "2025-01", _ONDEMAND),
    "g5.2xlarge": Price(1.212, "2025-01", _ONDEMAND),
    "g5.4xlarge": Price(1.624, "2025-01", _ONDEMAND),
    "g5.8xlarge": Price(2.448, "2025-01", _ONDEMAND),
    "g5.12xlarge": Price(5.672, "2025-01", _ONDEMAND),
    "g5.16xlarge": Price(4.096, "2025-01", _ONDEMAND),
    "g5.24xlarge": Price(8.144, "2025-01", _ONDEMAND),
    "g5.48xlarge": Price(16.288, "2025-01", _ONDEMAND),
}
PRICE_SOURCE = N_(
    "the dated table in workshop.plan.catalog.PRICES (aws.amazon.com/ec2/pricing/on-demand, us-east-1, "
    "Linux; P4/P5 after AWS's June 2025 cut; c8i/m8i/r8i from published 2025-12/2026-07 figures; bare-metal "
    "sizes unpriced); with AWS credentials, the AWS Price List API; check before budgeting"
)

_FAMILY_RE = re.compile(r"^(?P<cls>[a-z]+?)(?P<gen>\d+)(?P<attrs>[a-z]*)(?:-(?P<extra>[a-z0-9-]+))?$")
# Intel CPUs in these classes are 4th gen Xeon (Sapphire Rapids) or later from generation 7 on.
_GENERAL_CLASSES = {"c", "m", "r", "i", "x", "z", "u"}
_AMX_ACCELERATED = {"p5en": "Intel Xeon 4th gen (Sapphire Rapids) host CPU"}


class UnknownInstanceType(WorkshopError):
    """The catalog does not know a type asked for by name (instance_info turns it into a 'did you mean')."""


@dataclass(frozen=True)
class InstanceRow:
    """One instance type, with the few numbers that decide whether a training plan fits."""

    instance_type: str
    family: str
    size: str
    vcpus: int
    cores: int
    memory_gib: float
    network_performance: str
    efa: bool
    max_efa_interfaces: int
    gpus: int
    gpu_name: str | None
    gpu_memory_gib: float  # per GPU
    manufacturer: str
    arch: str
    clock_ghz: float | None
    bare_metal: bool
    amx: bool
    amx_reason: str
    hourly_usd: float | None

    @property
    def total_gpu_memory_gib(self) -> float:
        return self.gpus * self.gpu_memory_gib

    def amx_peak_tflops(self) -> float | None:
        """cores x the workbook's one AMX clock x 1,024 bf16 FLOP/cycle: the ceiling the original workshop's
        '30-50 TFLOPS' sits under, at the measured AMX host's clock (calibration.cpu_clock_basis), not the
        catalog's sustained one, so chapter 01 quotes one peak per machine and every share stands on it."""
        if not self.amx:
            return None
        from workshop.plan.calibration import cpu_clock_basis  # reads the stored calibration: only when asked

        return self.cores * cpu_clock_basis().value * AMX_BF16_FLOP_PER_CYCLE / 1000

    def as_dict(self) -> InstanceRecord:
        """Every field, then amx_peak_tflops: a row of chapter 01's instance table, `workshop instances
        --json`."""
        return cast(InstanceRecord, {**asdict(self), "amx_peak_tflops": self.amx_peak_tflops()})


class InstanceRecord(TypedDict):
    """InstanceRow.as_dict(): its fields (same names, same order), then the AMX peak."""

    instance_type: str
    family: str
    size: str
    vcpus: int
    cores: int
    memory_gib: float
    network_performance: str
    efa: bool
    max_efa_interfaces: int
    gpus: int
    gpu_name: str | None
    gpu_memory_gib: float
    manufacturer: str
    arch: str
    clock_ghz: float | None
    bare_metal: bool
    amx: bool
    amx_reason: str
    hourly_usd: float | None
    amx_peak_tflops: float | None


def split_type(instance_type: str) -> tuple[str, str]:
    family, _, size = instance_type.partition(".")
    return family, size


def amx_capability(family: str, manufacturer: str, arch: str) -> tuple[bool, str]:
    """Whether a family's CPU has AMX, and why; decided from the catalog's manufacturer and the family
    name."""
    if "arm64" in arch or manufacturer == "AWS":
        return False, "AWS Graviton (Arm): no AMX"
    if manufacturer == "AMD":
        return False, "AMD EPYC: AVX-512 on Zen 4+, but no AMX"
    if manufacturer != "Intel":
        return False, f"{manufacturer or 'unknown'} CPU: no AMX"
    if family in _AMX_ACCELERATED:
        return True, _AMX_ACCELERATED[family]
    m = _FAMILY_RE.match(family)
    if m and m["cls"] in _GENERAL_CLASSES and int(m["gen"]) >= 7 and "i" in m["attrs"]:
        return True, "Intel Xeon 4th gen (Sapphire Rapids) or later"
    return False, "Intel Xeon older than 4th gen: AVX-512 without AMX"


def unpriced_reason(instance_type: str, vcpus: int | None = None) -> str | None:
    """Why the dated table has no price for a type (None when it has one): the table names every type it
    cannot price, never drops it silently."""
    if price_of(instance_type, vcpus) is not None:
        return None
    if split_type(instance_type)[1].startswith("metal"):
        return UNPRICED_METAL
    return N_("not in the dated table; --price TYPE=USD")


def price_of(instance_type: str, vcpus: int | None = None) -> Price | None:
    """The dated table's price, or None when we do not know it for sure (why: unpriced_reason)."""
    if instance_type in PRICES:
        return PRICES[instance_type]
    family, size = split_type(instance_type)
    if family in _PER_VCPU and vcpus and not size.startswith("metal"):
        per = _PER_VCPU[family]
        return Price(round(per.usd * vcpus, 5), per.date, per.source + f" x {vcpus} vCPU / 2")
    return None


def hourly_price(instance_type: str, vcpus: int | None = None) -> float | None:
    """Published on-demand price, or None when we do not know it for sure (see PRICES)."""
    got = price_of(instance_type, vcpus)
    return got.usd if got else None


@lru_cache(maxsize=256)
def aws_price(instance_type: str, region: str = DEFAULT_REGION) -> Price | None:
    """Today's on-demand price from the AWS Price List API (boto3 `pricing`), or None when it has none.

    Why: the dated table ages; with credentials the price is read where AWS publishes it."""
    import boto3

    location = {"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)"}.get(region, region)
    filters = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v}
        for k, v in (
            ("instanceType", instance_type),
            ("location", location),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        )
    ]
    client = boto3.client("pricing", region_name="us-east-1")
    items = client.get_products(ServiceCode="AmazonEC2", Filters=filters, MaxResults=10).get("PriceList", [])
    for item in items:
        doc = json.loads(item) if isinstance(item, str) else item
        for term in doc.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD", 0) or 0)
                if usd > 0:
                    date = str(term.get("effectiveDate", "today"))[:10]
                    return Price(usd, date, f"AWS Price List API (get_products, {location})")
    return None


def to_row(item: dict) -> InstanceRow:
    """A DescribeInstanceTypes item (AWS or moto: the same shape) as an InstanceRow."""
    name = item["InstanceType"]
    family, size = split_type(name)
    vcpu = item.get("VCpuInfo", {})
    proc = item.get("ProcessorInfo", {})
    net = item.get("NetworkInfo", {})
    gpus = item.get("GpuInfo", {}).get("Gpus", [])
    manufacturer = proc.get("Manufacturer", "")
    arch = ",".join(proc.get("SupportedArchitectures", []))
    amx, why = amx_capability(family, manufacturer, arch)
    vcpus = int(vcpu.get("DefaultVCpus", 0))
    return InstanceRow(
        instance_type=name,
        family=family,
        size=size,
        vcpus=vcpus,
        cores=int(vcpu.get("DefaultCores", vcpus)),
        memory_gib=item.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024,
        network_performance=net.get("NetworkPerformance", ""),
        efa=bool(net.get("EfaSupported", False)),
        max_efa_interfaces=int(net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)),
        gpus=sum(int(g.get("Count", 0)) for g in gpus),
        gpu_name=gpus[0].get("Name") if gpus else None,
        gpu_memory_gib=gpus[0].get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024 if gpus else 0.0,
        manufacturer=manufacturer,
        arch=arch,
        clock_ghz=proc.get("SustainedClockSpeedInGhz"),
        bare_metal=bool(item.get("BareMetal", False)),
        amx=amx,
        amx_reason=why,
        hourly_usd=hourly_price(name, vcpus),
    )


@lru_cache(maxsize=1)
def has_aws_credentials() -> bool:
    """True when boto3's normal credential chain finds something (env, profile, SSO, instance role)."""
    try:
        import boto3

        return boto3.Session().get_credentials() is not None
    except Exception:  # noqa: BLE001 - any failure to find credentials means "none"
        return False


def _paginate(client, filters, instance_types) -> list[dict]:
    kwargs = {}
    if filters:
        kwargs["Filters"] = filters
    if instance_types:
        kwargs["InstanceTypes"] = list(instance_types)
    items: list[dict] = []
    for page in client.get_paginator("describe_instance_types").paginate(**kwargs):
        items.extend(page["InstanceTypes"])
    return items


def _query_aws(filters, instance_types, region) -> list[dict]:
    import boto3
    from botocore.config import Config

    cfg = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2})
    return _paginate(boto3.client("ec2", region_name=region, config=cfg), filters, instance_types)


def _query_moto(filters, instance_types, region) -> list[dict]:
    """moto's offline answer, read once per process for each query: the catalog never changes under a
    process, and one query costs 0.4-1.9 s (mock_aws builds its EC2 backend each time)."""
    key = json.dumps([filters, list(instance_types or ())], sort_keys=True)
    return copy.deepcopy(_moto_items(key, region))


@lru_cache(maxsize=256)
def _moto_items(key: str, region: str) -> list[dict]:
    import boto3
    from moto import mock_aws

    filters, instance_types = json.loads(key)
    with mock_aws():
        client = boto3.client(
            "ec2", region_name=region, aws_access_key_id="offline", aws_secret_access_key="offline"
        )
        return _paginate(client, filters, instance_types)


def _normalize_filters(filters) -> list[dict]:
    if not filters:
        return []
    if isinstance(filters, dict):
        return [{"Name": k, "Values": [v] if isinstance(v, str) else list(v)} for k, v in filters.items()]
    return list(filters)


def describe_instance_types(
    filters=None, *, instance_types=None, region: str = DEFAULT_REGION, source: str | None = None
) -> tuple[list[InstanceRow], str]:
    """DescribeInstanceTypes through boto3's paginator -> (rows sorted by name, which source answered).

    `filters` is the EC2 API's list of {"Name", "Values"} (or a {name: values} dict). `source` is "auto"
    (AWS if credentials are found, else moto), "aws" or "moto"; env WORKSHOP_CATALOG_SOURCE sets the default.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    source = source or os.environ.get("WORKSHOP_CATALOG_SOURCE", "auto")
    check_choice("catalog source", source, SOURCES)
    filters = _normalize_filters(filters)
    use_aws = source == "aws" or (source == "auto" and has_aws_credentials())
    note = ""
    items = None
    check_choice("region", region, known_regions("aws" if use_aws else "moto"))
    if use_aws:
        try:
            items = _query_aws(filters, instance_types, region)
            answered = f"aws (live DescribeInstanceTypes, {region})"
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidInstanceType":
                raise UnknownInstanceType(f"unknown instance type: {exc}") from None
            if source == "aws":
                raise WorkshopError(f"AWS DescribeInstanceTypes failed: {exc}") from None
            note = _("; AWS call failed ({error})").format(error=exc.__class__.__name__)
        except BotoCoreError as exc:
            if source == "aws":
                raise WorkshopError(f"AWS DescribeInstanceTypes failed: {exc}") from None
            note = _("; AWS call failed ({error})").format(error=exc.__class__.__name__)
    if items is None:
        import moto

        if region not in known_regions("moto"):
            raise WorkshopError(
                f"the offline catalog (moto) has no region {region!r}; allowed: "
                f"{', '.join(known_regions('moto'))}"
            )
        try:
            items = _query_moto(filters, instance_types, region)
        except ClientError as exc:
            raise UnknownInstanceType(f"{exc.response.get('Error', {}).get('Message', exc)}") from None
        answered = (
            _("moto {version} offline EC2 catalog (mock_aws; no AWS credentials found{note})")
            if not use_aws
            else _("moto {version} offline EC2 catalog (mock_aws; fallback{note})")
        ).format(version=moto.__version__, note=note)
    rows = sorted(
        (to_row(i) for i in items), key=lambda r: (r.family, r.vcpus, r.memory_gib, r.instance_type)
    )
    return rows, answered


@lru_cache(maxsize=1)
def known_types() -> tuple[str, ...]:
    """Every instance type in moto's bundled catalog: for 'did you mean' hints, without a network call."""
    import gzip

    import moto

    path = os.path.join(os.path.dirname(moto.__file__), "ec2", "resources", "instance_types.json.gz")
    with gzip.open(path, "rt") as fh:
        return tuple(sorted(json.load(fh)))


@lru_cache(maxsize=1)
def known_families() -> tuple[str, ...]:
    return tuple(sorted({split_type(n)[0] for n in known_types()}))


@lru_cache(maxsize=2)
def known_regions(source: str) -> tuple[str, ...]:
    """The regions a source can answer for, offline: botocore's endpoint list (aws), or the regions moto's
    catalog covers (moto). Checked before any query: an unknown one otherwise ends in a KeyError or an
    endpoint error deep inside boto3 or moto."""
    if source == "moto":
        import moto

        folder = os.path.join(
            os.path.dirname(moto.__file__), "ec2", "resources", "instance_type_offerings", "region"
        )
        return tuple(sorted(f.split(".")[0] for f in os.listdir(folder)))
    import boto3

    session = boto3.session.Session()
    return tuple(
        sorted(
            {
                r
                for part in session.get_available_partitions()
                for r in session.get_available_regions("ec2", partition_name=part)
            }
        )
    )


def _family_error(pattern: str) -> WorkshopError:
    close = difflib.get_close_matches(pattern.rstrip("*"), known_families(), n=5, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}" if close else ""
    return WorkshopError(f"no EC2 instance family matches {pattern!r}{hint}")


def check_families(families) -> None:
    """Each family pattern names at least one real family (offline: moto's list), before any query: one line
    naming the first that does not, with the closest real ones."""
    for fam in families:
        if not isinstance(fam, str) or not fam or "." in fam:
            raise WorkshopError(f"family {fam!r} should be a family such as 'r7i' (no size); use --size")
        if not any(fnmatch.fnmatchcase(f, fam) for f in known_families()):
            raise _family_error(fam)


def list_instances(
    families=DEFAULT_FAMILIES,
    *,
    sizes=None,
    efa: bool = False,
    region: str = DEFAULT_REGION,
    source: str | None = None,
) -> tuple[list[InstanceRow], str]:
    """Instance types of the given families (globs allowed: 'r7i', 'c8*'), optionally sizes and EFA only.

    Returns (rows, which source answered): InstanceRows sorted by family then size (memory in GiB, prices in
    USD per hour). A family pattern that matches nothing is an error naming the closest real families."""
    families = [families] if isinstance(families, str) else list(families or DEFAULT_FAMILIES)
    values = []
    for fam in families:
        if not fam or "." in fam:
            raise WorkshopError(f"family {fam!r} should be a family such as 'r7i' (no size); use --size")
        values += [f"{fam}.{s}" for s in sizes] if sizes else [f"{fam}.*"]
    filters = [{"Name": "instance-type", "Values": values}]
    if efa:
        filters.append({"Name": "network-info.efa-supported", "Values": ["true"]})
    rows, answered = describe_instance_types(filters, region=region, source=source)
    for fam in families:
        if not any(fnmatch.fnmatchcase(r.family, fam) for r in rows) and not any(
            fnmatch.fnmatchcase(f, fam) for f in known_families()
        ):
            raise _family_error(fam)
    have = {
        split_type(t)[1]
        for t in known_types()
        if any(fnmatch.fnmatchcase(split_type(t)[0], f) for f in families)
    }
    for size in sizes or ():  # a size no type of these families has (a typo), not one the EFA filter left out
        if not any(fnmatch.fnmatchcase(r.size, size) for r in rows) and not any(
            fnmatch.fnmatchcase(h, size) for h in have
        ):
            raise WorkshopError(
                f"no {'/'.join(families)} instance has size {size!r}; sizes of these families: "
                f"{', '.join(sorted(have))}"
            )
    return rows, answered


def instance_info(name: str, *, region: str = DEFAULT_REGION, source: str | None = None) -> InstanceRow:
    """One instance type as an InstanceRow (memory in GiB, prices in USD per hour); an unknown name is a
    WorkshopError with the closest real names."""
    if not isinstance(name, str) or "." not in name:
        raise WorkshopError(f"instance type {name!r} should look like 'r7i.48xlarge'")
    try:
        rows, _ = describe_instance_types(instance_types=[name], region=region, source=source)
    except UnknownInstanceType:
        family, _ = split_type(name)
        if family not in known_families():
            raise WorkshopError(f"unknown instance type {name!r}: {_family_error(family)}") from None
        raise WorkshopError(
            f"unknown instance type {name!r} (family {family} exists; check the size)"
        ) from None
    return rows[0]


def format_table(rows: list[InstanceRow]) -> str:
    """The rows as chapter 01's instance table: vCPUs, physical cores, memory in GiB, network, EFA, GPUs
    (count x name, GiB each), AMX, and the on-demand price in USD per hour (? = unknown)."""
    head = (
        f"{'instance type':<20} {'vCPU':>5} {'cores':>5} {'mem GiB':>8} {'network':<22} {'EFA':<4} "
        f"{'GPUs':<12} {'AMX':<4} {'$/h':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        gpu = f"{r.gpus}x{r.gpu_name} {r.gpu_memory_gib:.0f}G" if r.gpus else "-"
        price = f"{r.hourly_usd:.3f}" if r.hourly_usd is not None else "?"
        lines.append(
            f"{r.instance_type:<20} {r.vcpus:>5} {r.cores:>5} {r.memory_gib:>8.0f} "
            f"{r.network_performance[:22]:<22} {'yes' if r.efa else 'no':<4} {gpu[:12]:<12} "
            f"{'yes' if r.amx else 'no':<4} {price:>8}"
        )
    why: dict[str, list[str]] = {}
    for r in rows:
        reason = unpriced_reason(r.instance_type, r.vcpus) if r.hourly_usd is None else None
        if reason:
            why.setdefault(_(reason), []).append(r.instance_type)
    lines += [f"? {', '.join(types)}: {reason}" for reason, types in why.items()]
    return "\n".join(lines)


# Node capacity a pod can actually request, the way Karpenter and the EKS AMI compute it.
VM_MEMORY_OVERHEAD = 0.075  # Karpenter's default vmMemoryOverheadPercent
MAX_PODS = 110  # kubelet default; kube-reserved memory = 255 MiB + 11 MiB per pod (EKS AMI)
EVICTION_MIB = 100


def allocatable(row: InstanceRow) -> tuple[float, float]:
    """(GiB, vCPUs) a pod can request on this instance type, after VM, kubelet and eviction reserves."""
    kube_mib = 255 + 11 * MAX_PODS
    mem = row.memory_gib * (1 - VM_MEMORY_OVERHEAD) - (kube_mib + EVICTION_MIB) / 1024
    v = row.vcpus
    reserved_m = 60 + 10 * (v > 1) + 5 * max(0, min(v, 4) - 2) + 2.5 * max(0, v - 4)  # EKS AMI kube-reserved
    return mem, v - reserved_m / 1000


DAEMONSET_VCPUS = 1  # left on every node for the daemonsets (CNI, EFA plugin, kube-proxy, ...)
