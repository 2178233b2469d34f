"""The teardown's object model: the kinds it looks at, what marks an object as the workbook's, and what one
found object (its nodes, its file system) costs while it exists."""

from __future__ import annotations

from dataclasses import dataclass, field

from workshop.k8s.base import PART_OF
from workshop.plan.rates import FSX_PRICE_URL, HOURS_PER_MONTH, STORAGE

FIELD_MANAGER = "workshop"
# FSx for Lustre SCRATCH_2 storage, USD per GB-month: plan/rates.py's price (AWS list price, us-east-1);
# other regions and deployment types cost more or less.
FSX_SCRATCH2_USD_PER_GB_MONTH = STORAGE["fsx"].usd_per_gb_month.value
FSX_PRICE_SOURCE = (
    f"FSx for Lustre SCRATCH_2 at ${FSX_SCRATCH2_USD_PER_GB_MONTH:.3f} per GB-month "
    f"(AWS list price, us-east-1, {FSX_PRICE_URL}; other regions and deployment types differ), "
    f"{HOURS_PER_MONTH} hours a month"
)
# The pool names the workbook's builders give (karpenter.cpu_amx_pool, gpu_pool): their nodes are found by
# the label karpenter.sh/nodepool even when the pool itself is gone.
WORKBOOK_POOLS = ("cpu-amx", "gpu")
# What removes a finalizer (which controller, and when), in a learner's words: never a cause teardown did
# not check. For pvc-protection teardown lists the pods that mount the claim (`claim_users`) and says which.
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PVC_PROTECTION_CONTROLLER = "kube-controller-manager's PVC protection controller"
FINALIZER_WHY = {
    PVC_PROTECTION: f"{PVC_PROTECTION_CONTROLLER} removes it once no pod uses the claim",
    "kubernetes.io/pv-protection": "kube-controller-manager's PV protection controller removes it once no "
    "claim is bound to the volume",
    "karpenter.sh/termination": "Karpenter drains and terminates the node first (its controller must run)",
    "karpenter.k8s.aws/termination": "Karpenter removes it once no NodeClaim uses this node class "
    "(needs its controller running)",
    "foregroundDeletion": "the garbage collector deletes its dependents (pods, jobs) first",
    "orphan": "the garbage collector orphans its dependents first",
}


def _pvc_why(users: list[str] | None) -> str:
    """pvc-protection with what teardown saw: the pods that mount the claim, none, or not looked at."""
    if users is None:
        return FINALIZER_WHY[PVC_PROTECTION]
    if users:
        who = f"pod {users[0]} still mounts" if len(users) == 1 else f"pods {', '.join(users)} still mount"
        return f"{who} the claim; {PVC_PROTECTION_CONTROLLER} removes it once no pod does"
    return (
        f"no pod mounts the claim, by the pods listed just now: only {PVC_PROTECTION_CONTROLLER} is left "
        "to remove it; if it stays, is the controller-manager running?"
    )


# Field managers that are controllers writing what they own (status, bindings, finalizers), not co-owners.
CONTROLLER_MANAGERS = frozenset(
    {
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "karpenter",
        "manager",  # kubebuilder's default: Trainer's, JobSet's controller
        "trainer-controller-manager",
        "jobset-controller-manager",
        "csi-provisioner",
        "external-provisioner",
        "external-attacher",
    }
)


def finalizer_text(obj: dict, users: list[str] | None = None) -> str:
    """'finalizer kubernetes.io/pvc-protection (...)' for each finalizer: what removes it; for a claim, the
    pods `users` that mount it (None: not looked at)."""
    held = (obj.get("metadata") or {}).get("finalizers") or []
    if not held:
        return "no finalizer left (the server removes it any moment)"
    return "; ".join(
        f"finalizer {f} ("
        + (
            _pvc_why(users)
            if f == PVC_PROTECTION
            else FINALIZER_WHY.get(f, "the controller that set it removes it")
        )
        + ")"
        for f in held
    )


def co_owners(obj: dict) -> list[str]:
    """Field managers besides `workshop` that applied or edited the object itself (a status subresource and
    the controllers above do not count): such an object is shared, and teardown leaves it."""
    out = set()
    for e in (obj.get("metadata") or {}).get("managedFields") or []:
        name = e.get("manager") or ""
        if name == FIELD_MANAGER or e.get("subresource") or name in CONTROLLER_MANAGERS:
            continue
        out.add(name or "(unnamed manager)")
    return sorted(out)


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str
    namespaced: bool


# The kinds the workbook creates, in the order --yes deletes them.
KINDS = (
    Kind("TrainJob", "trainer.kubeflow.org/v1alpha1", True),
    Kind("PersistentVolumeClaim", "v1", True),
    Kind("StorageClass", "storage.k8s.io/v1", False),
    Kind("NodePool", "karpenter.sh/v1", False),
    Kind("EC2NodeClass", "karpenter.k8s.aws/v1", False),
    Kind("ClusterTrainingRuntime", "trainer.kubeflow.org/v1alpha1", False),
    Kind("Secret", "v1", True),
)
ORDER = tuple(k.kind for k in KINDS)


@dataclass
class Node:
    name: str
    instance_type: str
    capacity_type: str = ""
    hourly_usd: float | None = None
    pool: str = ""

    def kind_of(self) -> tuple[str, str, float | None]:
        return self.instance_type, self.capacity_type, self.hourly_usd


def nodes_text(nodes: list[Node]) -> str:
    """'2 x r7i.48xlarge on-demand, $12.70/h each (node-a, node-b)', one group per type and capacity type."""
    groups: dict[tuple, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.kind_of(), []).append(n.name)
    parts = []
    for (itype, cap, price), names in groups.items():
        cost = "price unknown" if price is None else f"${price:.2f}/h" + (" each" if len(names) > 1 else "")
        if price is not None and cap == "spot":
            cost += " on-demand (spot costs less)"
        parts.append(f"{len(names)} x {itype}{' ' + cap if cap else ''}, {cost} ({', '.join(names)})")
    return "; ".join(parts)


@dataclass
class Volume:
    """The PersistentVolume behind a claim and the file system behind that."""

    name: str
    size_gib: float | None
    fsx_id: str | None
    reclaim: str
    deployment_type: str | None
    claim: str = ""
    phase: str = ""

    @property
    def monthly_usd(self) -> float | None:
        if self.fsx_id and self.size_gib and self.deployment_type == "SCRATCH_2":
            return self.size_gib * FSX_SCRATCH2_USD_PER_GB_MONTH
        return None

    def describe(self) -> str:
        size = f"{self.size_gib:g} GiB" if self.size_gib else "size unknown"
        what = f"FSx for Lustre {self.fsx_id}" if self.fsx_id else f"volume {self.name}"
        if self.monthly_usd is not None:
            cost = f"${self.monthly_usd / HOURS_PER_MONTH:.2f}/h (~${self.monthly_usd:.0f}/month) [fsx]"
        elif self.deployment_type:
            cost = f"price unknown ({self.deployment_type}: only SCRATCH_2 is priced here)"
        elif self.fsx_id and self.size_gib:
            monthly = self.size_gib * FSX_SCRATCH2_USD_PER_GB_MONTH
            cost = (
                "price unknown (its deployment type is no longer on the cluster; "
                f"as SCRATCH_2, the workbook's default: ~${monthly:.0f}/month [fsx])"
            )
        else:
            cost = "price unknown"
        return f"{what}, {size}: {cost}"

    def removal(self) -> list[str]:
        """The commands that end this volume's cost (its claim already gone)."""
        out = [f"kubectl delete pv {self.name}"]
        if self.fsx_id:
            out.append(f"aws fsx delete-file-system --file-system-id {self.fsx_id}")
        return out


@dataclass
class Found:
    """One object of the workbook's, and what it costs while it exists."""

    kind: str
    name: str
    namespace: str | None
    api_version: str
    found_by: str  # "label", "field manager" or both
    cost: str = "nothing by itself"
    details: list[str] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    volume: Volume | None = None
    models: list[str] = field(default_factory=list)  # claims: where a trained model is kept, and how we know
    unmarked: dict[str, str] = field(default_factory=dict)  # claims: annotations to write before a job goes
    storage_class: str | None = None  # claims: the class that provisioned them
    terminating: str = ""  # deletion asked for, a finalizer holds it: which, and what removes it

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class Inventory:
    found: list[Found] = field(default_factory=list)  # in deletion order
    left_alone: list[tuple[str, str, str]] = field(default_factory=list)  # kind, ref, why it is similar
    problems: list[str] = field(default_factory=list)  # what could not be read
    skipped: list[str] = field(default_factory=list)  # kinds the cluster does not serve
    kept_on_purpose: list[str] = field(default_factory=list)
    released: list[Volume] = field(default_factory=list)  # Released FSx volumes: still billed
    co_owned: list[tuple[str, str, str]] = field(default_factory=list)  # kind, ref, the other managers
    orphans: list[Node] = field(default_factory=list)  # nodes of a workbook pool that is gone: still billed
    orphan_claims: list[str] = field(default_factory=list)  # their NodeClaims (--yes deletes them)
    forbidden: list[str] = field(default_factory=list)  # kinds a 403 kept from being listed
    missing_namespace: str | None = None

    def of(self, kind: str) -> list[Found]:
        return [f for f in self.found if f.kind == kind]

    @property
    def with_model(self) -> list[Found]:
        return [f for f in self.found if f.models]

    def running_cost(self) -> tuple[float, float, list[str]]:
        """(nodes $/h, FSx $/h, what has no known price): each node counted once."""
        nodes: dict[str, Node] = {}
        for f in self.found:
            for n in f.nodes:
                nodes.setdefault(n.name, n)
        for n in self.orphans:
            nodes.setdefault(n.name, n)
        unknown = sorted({f"{n.instance_type} ({n.name})" for n in nodes.values() if n.hourly_usd is None})
        node_h = sum(n.hourly_usd for n in nodes.values() if n.hourly_usd is not None)
        fsx_h = 0.0
        for f in self.found:
            if f.volume is not None:
                if f.volume.monthly_usd is None:
                    unknown.append(f"{f.volume.fsx_id or f.volume.name} ({f.kind} {f.ref})")
                else:
                    fsx_h += f.volume.monthly_usd / HOURS_PER_MONTH
        return node_h, fsx_h, unknown


def managers(obj: dict) -> set[str]:
    """The field managers in an object's managedFields ('' for an unnamed one)."""
    return {e.get("manager") or "" for e in (obj.get("metadata") or {}).get("managedFields") or []}


def found_by(obj: dict) -> str:
    """How an object is marked as the workbook's ('label', 'field manager', both), or '' when it is not."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    marks = (["label"] if labels.get(PART_OF[0]) == PART_OF[1] else []) + (
        ["field manager"] if FIELD_MANAGER in managers(obj) else []
    )
    return " + ".join(marks)
