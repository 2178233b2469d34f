"""Karpenter v1 NodePool + EC2NodeClass as typed specs, and the workbook's two pools (cpu-amx and gpu).

Why code instead of a heredoc: the pool for the CPU run should follow from chapter 01's memory plan (the
instance that fits), every field is checked before it reaches a cluster, and what changes between the
original workshop's static YAML and ours can be read in one place:
- the original workshop installed IPEX with pip in EC2 userData. The host's Python is invisible to the
training
  container (and IPEX is retired: stock PyTorch uses AMX through oneDNN), so our userData does host-level
  work only, and `check_user_data` refuses host-side Python installs;
- the AMX taint keeps non-training pods off expensive nodes; only pods tolerating it land there;
- the CPU manufacturer is pinned to Intel, so a future family name can never give an AMD or Graviton node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.k8s.base import drop_none, workbook_labels
from workshop.lang import _

CLUSTER_NAME = "training-on-eks"
NODE_ROLE = "eksctl-KarpenterNodeRole-training-on-eks"
AMX_TAINT = ("intel.com/amx", "present", "NoSchedule")
GPU_TAINT = ("nvidia.com/gpu", None, "NoSchedule")

# Intel Xeon 4th gen (Sapphire Rapids, *7i*) and later families: every one has AMX (bf16/int8 tiles).
AMX_FAMILIES = (
    "c7i",
    "m7i",
    "r7i",
    "c7i-flex",
    "m7i-flex",
    "r7iz",
    "i7i",
    "i7ie",
    "u7i",
    "c8i",
    "m8i",
    "r8i",
    "c8i-flex",
    "m8i-flex",
    "r8i-flex",
)
# GPU instance types with EFA (the inter-node fabric NCCL uses through aws-ofi-nccl).
EFA_GPU_TYPES = (
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "g6e.8xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.48xlarge",
)
CAPACITY_TYPES = ("spot", "on-demand", "reserved")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONSOLIDATION = ("WhenEmpty", "WhenEmptyOrUnderutilized")
_SIZE = re.compile(r"^(medium|large|\d*xlarge|metal(-\d+xl)?)$")
_DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
# The EKS-optimized AL2023 AMI release the nodes boot (amazon-eks-ami release v20250419:
# github.com/awslabs/amazon-eks-ami/releases/tag/v20250419), pinned: with `al2023@latest` every new AMI
# release marks every node Drifted and Karpenter replaces it, a running job's node included.
# Bump it between jobs (chapter 02 says when): the NodePools' Drifted budget of 0 nodes keeps the old nodes
# until they are empty, so the new AMI reaches the next job's nodes.
AMI_ALIAS = "al2023@v20250419"
_ZONE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")

CPU_USER_DATA = """#!/bin/bash
# Host-level setup only. Python, PyTorch and DeepSpeed live in the training image: packages
# installed on the host are invisible to containers, so nothing is pip-installed here.
# Record which matrix/vector engines this CPU exposes (visible in the instance console log).
grep -o -w -E 'amx_(bf16|int8|tile)|avx512_bf16' /proc/cpuinfo | sort -u | sed 's/^/workshop: cpu flag /'
"""

# The kubelet settings a Guaranteed pod needs to own whole cores: the static CPU manager policy (pods whose
# integer CPU requests equal their limits get exclusive cores, so OpenMP threads are never moved or shared).
# Karpenter's EC2NodeClass has no field for it; on AL2023 nodeadm reads it from a NodeConfig part of a MIME
# userData, which Karpenter merges with its own (kube-reserved CPU, which the static policy requires, is
# Karpenter's default).
STATIC_CPU_MANAGER = "static"
MIME_BOUNDARY = "//"


def static_cpu_user_data(script: str = CPU_USER_DATA) -> str:
    """MIME userData: a NodeConfig setting the kubelet's static CPU manager, then the host script."""
    return (
        f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n\n'
        f"--{MIME_BOUNDARY}\nContent-Type: application/node.eks.aws\n\n"
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n"
        f"      cpuManagerPolicy: {STATIC_CPU_MANAGER}\n      cpuManagerReconcilePeriod: 10s\n\n"
        f'--{MIME_BOUNDARY}\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n{script}\n'
        f"--{MIME_BOUNDARY}--\n"
    )


_HOST_PYTHON = re.compile(
    r"\b(pip3?|conda|mamba)\s+install\b|intel[-_]extension[-_]for[-_]pytorch", re.IGNORECASE
)


def check_user_data(text: str | None) -> None:
    """Refuse host-side Python installs: the container never sees them (the original workshop's mistake)."""
    found = _HOST_PYTHON.search(text) if text else None
    if found:
        raise WorkshopError(
            "userData installs Python packages on the host "
            f"({found.group(0)!r}); containers never see them: "
            "bake them into the training image instead"
        )


@dataclass
class Requirement:
    key: str
    operator: str = "In"
    values: list[str] | None = None
    min_values: int | None = None

    def __post_init__(self):
        check_choice("requirement operator", self.operator, OPERATORS)
        if self.values is not None:
            self.values = [str(v) for v in self.values]

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "operator": self.operator,
            "values": self.values,
            "minValues": self.min_values,
        }


@dataclass
class Taint:
    key: str
    value: str | None = None
    effect: str = "NoSchedule"

    def __post_init__(self):
        check_choice("taint effect", self.effect, EFFECTS)

    def to_dict(self) -> dict:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass
class NodePoolSpec:
    """A Karpenter v1 NodePool: which nodes may be launched for pods that fit, and when they go away."""

    name: str
    node_class: str
    requirements: list[Requirement]
    taints: list[Taint] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str | int] = field(default_factory=dict)
    consolidation_policy: str = "WhenEmpty"
    consolidate_after: str = "20m"
    expire_after: str = "720h"
    budget_nodes: str | None = None
    block_drift: bool = True  # a budget of 0 nodes for Drifted: a new AMI never replaces a node under a job
    weight: int | None = None
    object_labels: dict[str, str] = field(
        default_factory=workbook_labels
    )  # the NodePool's own (not its nodes')

    def __post_init__(self):
        check_choice("consolidation policy", self.consolidation_policy, CONSOLIDATION)
        for what, value in (("consolidateAfter", self.consolidate_after), ("expireAfter", self.expire_after)):
            if not _DURATION.match(str(value)):
                raise WorkshopError(
                    f"{what} {value!r} must be a duration in s/m/h (e.g. 20m, 720h) or 'Never'"
                )

    def to_dict(self) -> dict:
        return drop_none(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": self.name, "labels": dict(self.object_labels) or None},
                "spec": {
                    "template": {
                        "metadata": {"labels": dict(self.labels)} if self.labels else None,
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": self.node_class,
                            },
                            "requirements": [r.to_dict() for r in self.requirements],
                            "taints": [t.to_dict() for t in self.taints] or None,
                            "expireAfter": self.expire_after,
                        },
                    },
                    "limits": dict(self.limits) or None,
                    "disruption": {
                        "consolidationPolicy": self.consolidation_policy,
                        "consolidateAfter": self.consolidate_after,
                        "budgets": (
                            ([{"nodes": self.budget_nodes}] if self.budget_nodes else [])
                            + ([{"nodes": "0", "reasons": ["Drifted"]}] if self.block_drift else [])
                        )
                        or None,
                    },
                    "weight": self.weight,
                },
            }
        )


@dataclass
class EC2NodeClassSpec:
    """A Karpenter EC2NodeClass: the AWS side of a node (AMI, IAM role, subnets, disks, userData)."""

    name: str
    role: str | None = NODE_ROLE
    instance_profile: str | None = None
    ami_alias: str = AMI_ALIAS
    cluster: str = CLUSTER_NAME  # value of the karpenter.sh/discovery tag on subnets and SGs
    volume_size: str = "300Gi"
    volume_type: str = "gp3"
    device_name: str = "/dev/xvda"
    user_data: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    object_labels: dict[str, str] = field(default_factory=workbook_labels)

    def __post_init__(self):
        if bool(self.role) == bool(self.instance_profile):
            raise WorkshopError(
                _(
                    "give exactly one of role and instance_profile "
                    "(got role={role}, instance_profile={profile})"
                ).format(role=repr(self.role), profile=repr(self.instance_profile))
            )
        check_choice("volume type", self.volume_type, ("gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"))
        check_user_data(self.user_data)

    def to_dict(self) -> dict:
        discovery = [{"tags": {"karpenter.sh/discovery": self.cluster}}]
        return drop_none(
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": self.name, "labels": dict(self.object_labels) or None},
                "spec": {
                    "role": self.role,
                    "instanceProfile": self.instance_profile,
                    "amiSelectorTerms": [{"alias": self.ami_alias}],
                    "subnetSelectorTerms": discovery,
                    "securityGroupSelectorTerms": discovery,
                    "blockDeviceMappings": [
                        {
                            "deviceName": self.device_name,
                            "ebs": {
                                "volumeSize": self.volume_size,
                                "volumeType": self.volume_type,
                                "encrypted": True,
                                "deleteOnTermination": True,
                            },
                        }
                    ],
                    "userData": self.user_data,
                    "tags": dict(self.tags) or None,
                },
            }
        )


@dataclass
class Pool:
    """A NodePool and the EC2NodeClass it points to: the unit one applies together."""

    node_pool: NodePoolSpec
    node_class: EC2NodeClassSpec

    def to_dicts(self) -> list[dict]:
        """The NodePool and the EC2NodeClass as API objects (two dicts), in apply order."""
        return [self.node_pool.to_dict(), self.node_class.to_dict()]


def _strs(what: str, values) -> list[str]:
    values = [values] if isinstance(values, str) else list(values)
    if not values:
        raise WorkshopError(f"{what}: give at least one value")
    return values


def vcpus_of(size: str) -> int | None:
    """vCPUs of an Intel x86 size name: large=2, xlarge=4, Nxlarge=4N, metal-Nxl=4N."""
    m = re.match(r"^(?:metal-)?(\d*)x(?:large|l)$", size)
    if m:
        return 4 * int(m.group(1) or 1)
    return {"large": 2, "medium": 1}.get(size)


def _amx_types(families: list[str], sizes: list[str], instance_types: Sequence[str] | None) -> list[str]:
    """Check the AMX families and the sizes; the exact instance types asked for ([] = every combination)."""
    exact = _strs("instance_types", instance_types) if instance_types is not None else []
    for itype in exact:
        fam, _dot, size = itype.partition(".")
        if fam not in families or size not in sizes:
            raise WorkshopError(f"instance type {itype!r} is outside families {families} x sizes {sizes}")
    for fam in families:
        check_choice("AMX instance family", fam, AMX_FAMILIES)
    for size in sizes:
        if not _SIZE.match(size):
            raise WorkshopError(f"instance size {size!r} is not an EC2 size such as 8xlarge or metal-48xl")
    return exact


def cpu_amx_pool(
    families: Sequence[str] = ("c7i", "m7i", "r7i"),
    sizes: Sequence[str] = ("8xlarge", "16xlarge", "24xlarge", "48xlarge"),
    *,
    capacity_types: Sequence[str] = ("on-demand",),  # the planner prices on demand; a spot plan says so
    arch: str = "amd64",
    cpu_limit: int = 1000,
    name: str = "cpu-amx",
    cluster: str = CLUSTER_NAME,
    role: str | None = NODE_ROLE,
    instance_profile: str | None = None,
    volume_size: str = "300Gi",
    consolidate_after: str = "20m",
    expire_after: str = "720h",
    user_data: str | None = CPU_USER_DATA,
    instance_types: Sequence[str] | None = None,
    zone: str | None = None,
) -> Pool:
    """The CPU pool (a Pool: its NodePool and EC2NodeClass): AMX-capable Intel families only, tainted so only
    training pods land there; `instance_types` narrows it to exactly those types (families x sizes alone admit
    every combination); `zone` pins it to one availability zone (the FSx subnet's: a gloo ring across zones
    is slow and billed per GB each way). `cpu_limit` is in vCPUs, `volume_size` a Kubernetes quantity of root
    disk, `consolidate_after`/`expire_after` Go durations."""
    families, sizes = _strs("families", families), _strs("sizes", sizes)
    exact = _amx_types(families, sizes, instance_types)
    for cap in _strs("capacity_types", capacity_types):
        check_choice("capacity type", cap, CAPACITY_TYPES)
    check_choice("arch", arch, ("amd64",))  # AMX is an x86 feature
    check_positive("cpu_limit", cpu_limit)
    _check_zone(zone)
    key, value, effect = AMX_TAINT
    pool = NodePoolSpec(
        name=name,
        node_class=name,
        labels={"nodeType": name},
        requirements=[
            Requirement("kubernetes.io/arch", "In", [arch]),
            Requirement("kubernetes.io/os", "In", ["linux"]),
            Requirement("karpenter.sh/capacity-type", "In", list(capacity_types)),
            Requirement("karpenter.k8s.aws/instance-cpu-manufacturer", "In", ["intel"]),
            Requirement("karpenter.k8s.aws/instance-family", "In", families),
            Requirement("karpenter.k8s.aws/instance-size", "In", sizes),
            *([Requirement("node.kubernetes.io/instance-type", "In", exact)] if exact else []),
            *([Requirement("topology.kubernetes.io/zone", "In", [zone])] if zone else []),
        ],
        taints=[Taint(key, value, effect)],
        limits={"cpu": cpu_limit},
        consolidation_policy="WhenEmpty",
        consolidate_after=consolidate_after,
        expire_after=expire_after,
    )
    node_class = EC2NodeClassSpec(
        name=name,
        role=role,
        instance_profile=instance_profile,
        cluster=cluster,
        volume_size=volume_size,
        user_data=user_data,
    )
    return Pool(pool, node_class)


def _check_zone(zone: str | None) -> None:
    if zone is not None and not _ZONE.match(zone):
        raise WorkshopError(
            _("zone '{zone}' is not an availability-zone name such as us-west-2b").format(zone=zone)
        )


def gpu_pool(
    instance_types: Sequence[str] = ("p4d.24xlarge", "p5.48xlarge", "g6e.8xlarge"),
    *,
    zone: str = "us-west-2b",
    capacity_types: Sequence[str] = ("on-demand",),
    gpu_limit: int = 32,
    name: str = "gpu",
    efa: bool = True,  # the nodes' workshop/efa label; False: a plan whose pods ask no EFA
    known_types: bool = True,  # False: types a plan file's catalog already vouched for (plan_pool)
    cluster: str = CLUSTER_NAME,
    role: str | None = NODE_ROLE,
    instance_profile: str | None = None,
    volume_size: str = "500Gi",
    consolidate_after: str = "20m",
    expire_after: str = "720h",
) -> Pool:
    """The GPU pool (a Pool: NodePool + EC2NodeClass): EFA-capable types only, all in ONE zone (EFA
    traffic does not cross zones). `gpu_limit` is in GPUs, `volume_size` a quantity of root disk,
    `consolidate_after`/`expire_after` Go durations."""
    instance_types = _strs("instance_types", instance_types)
    for itype in instance_types if known_types else ():
        check_choice("EFA-capable GPU instance type", itype, EFA_GPU_TYPES)
    _check_zone(zone)
    for cap in _strs("capacity_types", capacity_types):
        check_choice("capacity type", cap, CAPACITY_TYPES)
    check_positive("gpu_limit", gpu_limit)
    key, value, effect = GPU_TAINT
    pool = NodePoolSpec(
        name=name,
        node_class=name,
        labels={"nodeType": name, "workshop/efa": "true" if efa else "false"},
        requirements=[
            Requirement("kubernetes.io/arch", "In", ["amd64"]),
            Requirement("kubernetes.io/os", "In", ["linux"]),
            Requirement("karpenter.sh/capacity-type", "In", list(capacity_types)),
            Requirement("node.kubernetes.io/instance-type", "In", instance_types),
            Requirement("topology.kubernetes.io/zone", "In", [zone]),
        ],
        taints=[Taint(key, value, effect)],
        limits={"nvidia.com/gpu": gpu_limit},
        consolidation_policy="WhenEmpty",
        consolidate_after=consolidate_after,
        expire_after=expire_after,
    )
    node_class = EC2NodeClassSpec(
        name=name, role=role, instance_profile=instance_profile, cluster=cluster, volume_size=volume_size
    )
    return Pool(pool, node_class)


def instance_types_of(rec) -> list[str]:
    """Instance types named by a recommendation: an object or dict with `instance_type` or
    `instance_types`, a list of names, or one name."""
    if isinstance(rec, str):
        return [rec]
    if isinstance(rec, dict):
        found = rec.get("instance_types") or rec.get("instance_type")
    elif isinstance(rec, Iterable) and not hasattr(rec, "instance_type"):
        found = list(rec)
    else:
        found = getattr(rec, "instance_types", None) or getattr(rec, "instance_type", None)
    if not found:
        raise WorkshopError(f"recommendation {rec!r} names no instance_type (e.g. 'r7i.8xlarge')")
    return [found] if isinstance(found, str) else [str(t) for t in found]


def pool_from_recommendation(rec, **kwargs) -> Pool:
    """The cpu-amx pool (a Pool) narrowed to what chapter 01's plan chose: its families and sizes (with
    `exact` on a dict, exactly its instance types); with `nodes` on the recommendation, the CPU limit is
    exactly nodes x vCPUs of the largest admitted size, so Karpenter cannot overshoot and can still launch
    the plan."""
    types = instance_types_of(rec)
    families, sizes = [], []
    for itype in types:
        fam, dot, size = itype.partition(".")
        if not dot or not size:
            raise WorkshopError(f"instance type {itype!r} is not of the form family.size (e.g. r7i.8xlarge)")
        families += [fam] if fam not in families else []
        sizes += [size] if size not in sizes else []
    nodes = rec.get("nodes") if isinstance(rec, dict) else getattr(rec, "nodes", None)
    if nodes and "cpu_limit" not in kwargs:
        per_node = max(vcpus_of(s) or 0 for s in sizes)
        if per_node:
            kwargs["cpu_limit"] = int(nodes) * per_node
    if isinstance(rec, dict) and rec.get("exact"):
        kwargs.setdefault("instance_types", types)
    return cpu_amx_pool(families, sizes, **kwargs)


def plan_pool(plan, *, name: str | None = None, **kwargs) -> Pool:
    """The pool of exactly this plan (workshop.plan.job.Plan): its instance type and the tie-band types that
    host the same pod, the plan's capacity type only (on-demand unless it is a spot plan), a limit of exactly
    the plan's nodes, and on CPU the static CPU manager its Guaranteed pods need."""
    pl = plan.placement
    types = list(pl.pool_types)
    caps = (pl.capacity_type,)
    if pl.device == "gpu":
        return gpu_pool(
            types,
            capacity_types=caps,
            gpu_limit=pl.nodes * pl.gpus_per_node,
            name=name or "gpu",
            efa=pl.efa_per_node > 0 or all(t in EFA_GPU_TYPES for t in types),
            known_types=False,  # the plan's catalog checked every type (workshop.plan.job.check_hosts)
            **kwargs,
        )
    families = sorted({t.partition(".")[0] for t in types})
    sizes = sorted({t.partition(".")[2] for t in types})
    per_node = max(vcpus_of(s) or 0 for s in sizes)
    return cpu_amx_pool(
        families,
        sizes,
        instance_types=types,
        capacity_types=caps,
        cpu_limit=pl.nodes * per_node,
        name=name or "cpu-amx",
        user_data=static_cpu_user_data(),
        **kwargs,
    )


def original_static_pool() -> list[dict]:
    """The original workshop's hand-written cpu-amx NodePool and EC2NodeClass (a list of dicts), restated
    as data so the notebook can diff against it. Same fields and values; its userData (host-side
    yum/dnf/pip installs, IPEX included) is summarised."""
    pool = NodePoolSpec(
        name="cpu-amx",
        node_class="cpu-amx",
        labels={"nodeType": "cpu-amx"},
        requirements=[
            Requirement("kubernetes.io/arch", "In", ["amd64"]),
            Requirement("karpenter.sh/capacity-type", "In", ["spot", "on-demand"]),
            Requirement("karpenter.k8s.aws/instance-family", "In", ["c7i", "m7i", "r7i"]),
            Requirement(
                "karpenter.k8s.aws/instance-size", "In", ["8xlarge", "16xlarge", "24xlarge", "48xlarge"]
            ),
        ],
        taints=[Taint(*AMX_TAINT[:2], AMX_TAINT[2])],
        limits={"cpu": 1000},
        object_labels={},
    )
    node_class = EC2NodeClassSpec(name="cpu-amx", object_labels={}).to_dict()
    node_class["spec"]["blockDeviceMappings"][0]["ebs"] = {"volumeSize": "300Gi", "volumeType": "gp3"}
    node_class["spec"]["userData"] = (
        "#!/bin/bash\n# original workshop: host-side package installs, IPEX included\n"
        "pip install intel-extension-for-pytorch\n"
    )
    return [pool.to_dict(), node_class]


# ---------------------------------------------------------------- what a pool admits


def instance_labels(row) -> dict[str, str]:
    """The well-known node labels Karpenter matches requirements against, for one catalog row."""
    return {
        "node.kubernetes.io/instance-type": row.instance_type,
        "karpenter.k8s.aws/instance-family": row.family,
        "karpenter.k8s.aws/instance-size": row.size,
        "kubernetes.io/arch": {"x86_64": "amd64", "arm64": "arm64"}.get(row.arch, row.arch),
        "karpenter.k8s.aws/instance-cpu-manufacturer": (row.manufacturer or "").lower(),
        "karpenter.k8s.aws/instance-cpu": str(row.vcpus),
        "karpenter.k8s.aws/instance-memory": str(int(row.memory_gib * 1024)),
        "karpenter.k8s.aws/instance-gpu-count": str(row.gpus),
    }


def admits(nodepool: dict, row) -> bool:
    """Would this NodePool let Karpenter launch this instance type? Requirements on labels the catalog
    cannot know (capacity type, zone) are not judged here: a pool admits a type if some launch could match."""
    labels = instance_labels(row)
    for req in nodepool["spec"]["template"]["spec"].get("requirements", []):
        key, op, values = req["key"], req["operator"], req.get("values", [])
        if key not in labels:
            continue
        value = labels[key]
        ok = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": True,
            "DoesNotExist": False,
            "Gt": value.isdigit() and int(value) > int(values[0]),
            "Lt": value.isdigit() and int(value) < int(values[0]),
        }[op]
        if not ok:
            return False
    return True


def admission_table(rows, pools: dict[str, dict]) -> list[dict]:
    """One row (a dict) per instance type: its vCPUs, memory in GiB and EFA interfaces, and for each named
    NodePool whether it admits the type."""
    return [
        {
            "instance_type": r.instance_type,
            "vcpus": r.vcpus,
            "memory_gib": r.memory_gib,
            "efa": r.efa,
            **{name: admits(pool, r) for name, pool in pools.items()},
        }
        for r in rows
    ]
