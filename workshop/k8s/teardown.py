"""`workshop cluster teardown`: list everything the workbook created on a cluster and what it costs while it
exists; with `--yes`, remove it in dependency order and wait until Karpenter has drained the nodes.

What is the workbook's: an object labelled `app.kubernetes.io/part-of=workshop`, or one whose
`metadata.managedFields` names the field manager `workshop` (every server-side apply of the workbook uses it,
chapter 05's Trainer install included). Nothing else is ever touched: objects of the same kinds without either
mark are listed as left alone. The kinds looked at, in the order `--yes` deletes them:

  TrainJob -> PersistentVolumeClaim -> StorageClass -> NodePool -> EC2NodeClass -> ClusterTrainingRuntime ->
  Secret

TrainJobs first (their pods hold nodes and mount the claim), then the claims (and the StorageClass that
provisions their file systems), then the pools: deleting a NodePool makes Karpenter drain and terminate its
nodes (the EC2NodeClass's finalizer waits for that), then the runtimes and the HF token Secret nothing needs
any more. Teardown then waits (`--timeout`) until no NodeClaim of a deleted pool is left.

What each object costs is read from the cluster: a NodePool's NodeClaims (instance type, capacity type), the
nodes a kept TrainJob's running pods sit on, a claim's FSx for Lustre file system (its PersistentVolume's
`spec.csi.volumeHandle` is the file system id, its capacity the size). EC2 prices come from
`workshop.plan.catalog` (on-demand list prices it is sure of; "unknown" otherwise); FSx is priced at the
SCRATCH_2 list price below, an assumption that is printed with its source.

The trained model is never lost by accident. A claim holds a model when
  * it carries the annotation `models.workshop.example.com/<job>: /fsx/<job>/final`, which
    `jobs.run_on_cluster` writes when a job that saves its model there ends Complete, before it deletes the
    job (`storage.MODEL_ANNOTATION`; for a job run another way, `kubectl annotate` it by hand), or
  * a TrainJob still on the cluster has ended Complete, mounts the claim and passes `--save-model` with its
    `--output-dir` on that mount (the model is then `<output-dir>/final`).
Then `--yes` stops before deleting anything, unless `--keep-model` (everything else goes; the claim, its
StorageClass and the file system stay, and the commands that remove them later are printed) or
`--delete-model` (the claim goes too). The StorageClass reclaims with `Retain`, so deleting a claim never
deletes the FSx file system: the released PersistentVolume is named with its file system id and the
`aws fsx delete-file-system` call that ends its cost (teardown never deletes a file system itself).

Not removed on purpose: the Kubeflow Trainer controller (its CRDs hold every TrainJob on the cluster, other
people's too), and chapter 05's self-referencing security-group rules (EC2, not the cluster; they cost
nothing).

"Deleted" is said only of an object a re-read no longer finds. One a finalizer holds stays Terminating: it is
named with the finalizer and what removes it (`kubernetes.io/pvc-protection`: a pod still mounts the claim;
`karpenter.sh/termination`: Karpenter drains the node), and teardown waits for it within `--timeout`.
NodeClaims and Nodes labelled `karpenter.sh/nodepool=<a workbook pool>` are found, and their cost counted,
even after their NodePool is gone (a drain that timed out leaves them); --yes deletes those NodeClaims, so
that Karpenter terminates their instances, and waits. An object the workbook applied that another field
manager (a person's `kubectl`, another tool; not a controller writing status) also applied is co-owned:
listed, never deleted.

Exit codes: 0 listed (dry run) or everything removed; 1 something could not be listed or removed (a 403, a
timeout while Karpenter drains); 2 bad flags or no cluster; 3 stopped, nothing deleted: a claim holds a model;
4 deletion asked for, but objects are still Terminating at the timeout (a finalizer holds them: named).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workshop.errors import WorkshopError, check_positive
from workshop.k8s.base import PART_OF
from workshop.k8s.cluster import ClusterError
from workshop.k8s.storage import FSX_PROVISIONER, MODEL_ANNOTATION, model_dir
from workshop.plan.catalog import PRICE_SOURCE, hourly_price

FIELD_MANAGER = "workshop"
# FSx for Lustre SCRATCH_2 storage, USD per GB-month: AWS's published list price in us-east-1
# (https://aws.amazon.com/fsx/lustre/pricing/); other regions and deployment types cost more or less.
FSX_SCRATCH2_USD_PER_GB_MONTH = 0.140
FSX_PRICE_SOURCE = (
    "FSx for Lustre SCRATCH_2 at $0.140 per GB-month (AWS list price, us-east-1, "
    "aws.amazon.com/fsx/lustre/pricing; other regions and deployment types differ), 730 hours a month"
)
HOURS_PER_MONTH = 730
POLL_S = 10.0  # how often the drain wait looks at the NodeClaims
PROGRESS_S = 60.0  # and prints a line even when nothing changed
TRAINER_NAMESPACE = "kubeflow-system"
LEFT_ALONE_SHOWN = 10  # per kind; a shared cluster may have many
COMMAND = "python -m workshop cluster teardown"
EXIT_TERMINATING = 4
# The pool names the workbook's builders give (karpenter.cpu_amx_pool, gpu_pool): their nodes are found by
# the label karpenter.sh/nodepool even when the pool itself is gone.
WORKBOOK_POOLS = ("cpu-amx", "gpu")
# What removes a finalizer, in a learner's words.
FINALIZER_WHY = {
    "kubernetes.io/pvc-protection": "a pod still mounts the claim; it goes when that pod is gone",
    "kubernetes.io/pv-protection": "a claim is still bound to the volume",
    "karpenter.sh/termination": "Karpenter drains and terminates the node first (its controller must run)",
    "karpenter.k8s.aws/termination": "Karpenter removes it once no NodeClaim uses this node class "
    "(needs its controller running)",
    "foregroundDeletion": "the garbage collector deletes its dependents (pods, jobs) first",
    "orphan": "the garbage collector orphans its dependents first",
}
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


def finalizer_text(obj: dict) -> str:
    """'finalizer kubernetes.io/pvc-protection (a pod still mounts the claim; ...)' for each finalizer."""
    held = (obj.get("metadata") or {}).get("finalizers") or []
    if not held:
        return "no finalizer left (the server removes it any moment)"
    return "; ".join(
        f"finalizer {f} ({FINALIZER_WHY.get(f, 'the controller that set it removes it')})" for f in held
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
            cost = (
                "price unknown (its deployment type is no longer on the cluster; as SCRATCH_2, the "
                "workbook's "
                f"default: ~${self.size_gib * FSX_SCRATCH2_USD_PER_GB_MONTH:.0f}/month [fsx])"
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


# ------------------------------------------------------------------------------------------- reading
def managers(obj: dict) -> set[str]:
    return {e.get("manager") or "" for e in (obj.get("metadata") or {}).get("managedFields") or []}


def found_by(obj: dict) -> str:
    """How an object is marked as the workbook's ('label', 'field manager', both), or '' when it is not."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    marks = (["label"] if labels.get(PART_OF[0]) == PART_OF[1] else []) + (
        ["field manager"] if FIELD_MANAGER in managers(obj) else []
    )
    return " + ".join(marks)


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _ref(obj: dict) -> str:
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _conditions(obj: dict) -> dict[str, str]:
    return {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
_TO_GIB = {
    "Ki": 2**-20,
    "Mi": 2**-10,
    "Gi": 1,
    "Ti": 2**10,
    "Pi": 2**20,
    "k": 1e3 / 2**30,
    "M": 1e6 / 2**30,
    "G": 1e9 / 2**30,
    "T": 1e12 / 2**30,
    "P": 1e15 / 2**30,
    None: 1 / 2**30,
}


def gib(quantity) -> float | None:
    """A storage quantity ('1200Gi', '1.2Ti', '1288490188800') in GiB; None when it is not one."""
    m = _QUANTITY.match(str(quantity or "").strip())
    return round(float(m.group(1)) * _TO_GIB[m.group(2)], 3) if m else None


def _vcpus(labels: dict, capacity: dict) -> int | None:
    for value in (labels.get("karpenter.k8s.aws/instance-cpu"), capacity.get("cpu")):
        if value is not None and str(value).isdigit():
            return int(value)
    return None


def _node_of_claim(claim: dict) -> Node:
    labels, status = _meta(claim).get("labels") or {}, claim.get("status") or {}
    itype = labels.get("node.kubernetes.io/instance-type", "?")
    return Node(
        name=status.get("nodeName") or _meta(claim).get("name", "?"),
        instance_type=itype,
        capacity_type=labels.get("karpenter.sh/capacity-type", ""),
        hourly_usd=hourly_price(itype, _vcpus(labels, status.get("capacity") or {})),
        pool=labels.get("karpenter.sh/nodepool", ""),
    )


def _node_of(node: dict) -> Node:
    labels = _meta(node).get("labels") or {}
    itype = labels.get("node.kubernetes.io/instance-type", "?")
    return Node(
        name=_meta(node).get("name", "?"),
        instance_type=itype,
        capacity_type=labels.get("karpenter.sh/capacity-type", ""),
        hourly_usd=hourly_price(itype, _vcpus(labels, (node.get("status") or {}).get("capacity") or {})),
        pool=labels.get("karpenter.sh/nodepool", ""),
    )


def _walk(value):
    """Every dict nested anywhere in a TrainJob's spec (volumes and mounts sit at different depths per
    form)."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def claim_mounts(job: dict) -> dict[str, str]:
    """claim name -> mount path, for the claims a TrainJob's pods mount (either Trainer form)."""
    volumes = {}
    for d in _walk(job.get("spec") or {}):
        pvc = d.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName") and d.get("name"):
            volumes[d["name"]] = pvc["claimName"]
    mounts = {}
    for d in _walk(job.get("spec") or {}):
        for m in d.get("volumeMounts") or []:
            if isinstance(m, dict) and m.get("name") in volumes and m.get("mountPath"):
                mounts[volumes[m["name"]]] = m["mountPath"]
    return mounts


def job_models(job: dict) -> dict[str, str]:
    """claim name -> where a Complete TrainJob wrote its final model on it."""
    if _conditions(job).get("Complete") != "True":
        return {}
    args = [str(a) for a in ((job.get("spec") or {}).get("trainer") or {}).get("args") or []]
    out = {}
    for claim, mount in claim_mounts(job).items():
        path = model_dir(args, mount)
        if path:
            out[claim] = path
    return out


def _referenced_secrets(job: dict) -> set[str]:
    return {
        d["secretKeyRef"]["name"]
        for d in _walk(job.get("spec") or {})
        if isinstance(d.get("secretKeyRef"), dict) and d["secretKeyRef"].get("name")
    }


class _Reader:
    """Lists what teardown needs, turning 'kind not served' (a component not installed) into a skip and any
    other refusal into a recorded problem, so one unreadable kind never hides the rest."""

    def __init__(self, cluster, inv: Inventory, namespace: str | None):
        self.cluster, self.inv, self.namespace = cluster, inv, namespace

    def list(
        self,
        kind: str,
        api_version: str,
        namespaced: bool,
        *,
        label_selector: str | None = None,
        quiet_missing: bool = False,
    ) -> list[dict] | None:
        try:
            out = self.cluster.get(
                kind,
                namespace=self.namespace if namespaced else None,
                api_version=api_version,
                label_selector=label_selector,
                all_namespaces=namespaced and not self.namespace,
            )
        except ClusterError as exc:
            if exc.status == 404:
                if not quiet_missing:
                    self.inv.skipped.append(str(exc))
                return None
            hint = (
                " (pass -n NAMESPACE to look in one namespace)" if namespaced and not self.namespace else ""
            )
            if exc.status == 403:
                self.inv.forbidden.append(kind)
            self.inv.problems.append(f"cannot list {kind}: {exc}{hint}")
            return None
        return out.get("items") or []

    def get(self, kind: str, name: str, namespace: str | None, api_version: str) -> dict | None:
        try:
            return self.cluster.get(kind, name, namespace, api_version=api_version)
        except ClusterError as exc:
            if exc.status != 404:
                self.inv.problems.append(
                    f"cannot read {kind} {namespace + '/' if namespace else ''}{name}: {exc}"
                )
            return None


def inventory(cluster, *, namespace: str | None = None) -> Inventory:
    """Everything of the workbook's on the cluster, with costs, plus the similar objects left alone. Reads
    only."""
    inv = Inventory()
    read = _Reader(cluster, inv, namespace)
    if namespace:
        try:
            cluster.get("Namespace", namespace, api_version="v1")
        except ClusterError as exc:
            if exc.status == 404:
                inv.missing_namespace = namespace
                inv.problems.append(f"namespace {namespace!r} does not exist on this cluster (check -n)")
    listed: dict[str, list[dict]] = {}
    for k in KINDS:
        if k.kind == "Secret":
            continue  # never list every Secret: only the labelled ones and those the jobs reference (below)
        listed[k.kind] = read.list(k.kind, k.api_version, k.namespaced) or []
    mine: dict[str, list[dict]] = {kind: [o for o in objs if found_by(o)] for kind, objs in listed.items()}

    # Secrets: the labelled ones, and any Secret a workbook TrainJob references (it may lack the label)
    secrets = {
        _ref(o): o for o in read.list("Secret", "v1", True, label_selector=f"{PART_OF[0]}={PART_OF[1]}") or []
    }
    for job in mine["TrainJob"]:
        ns = _meta(job).get("namespace") or "default"
        for name in sorted(_referenced_secrets(job)):
            if f"{ns}/{name}" not in secrets:
                obj = read.get("Secret", name, ns, "v1")
                if obj is not None:
                    secrets[f"{ns}/{name}"] = obj
    listed["Secret"] = list(secrets.values())
    mine["Secret"] = [o for o in listed["Secret"] if found_by(o)]

    # nodes: every NodeClaim (Karpenter's record of a node it launched) and every Node, read once
    claims = read.list("NodeClaim", "karpenter.sh/v1", False, quiet_missing=True) or []
    nodes = {_meta(n).get("name"): n for n in read.list("Node", "v1", False, quiet_missing=True) or []}
    storage_classes = {_meta(o).get("name"): o for o in listed["StorageClass"]}

    # claims holding a model: annotations, and Complete TrainJobs (anyone's) that saved onto them
    models: dict[str, dict[str, str]] = {}  # namespace/claim -> {job: path}
    for job in listed["TrainJob"]:
        ns = _meta(job).get("namespace") or "default"
        for claim, path in job_models(job).items():
            models.setdefault(f"{ns}/{claim}", {})[_meta(job).get("name", "?")] = path

    for k in KINDS:
        for obj in mine[k.kind]:
            meta = _meta(obj)
            shared = co_owners(obj)
            if shared and PART_OF[0] not in (meta.get("labels") or {}):  # the label: the workbook's own file
                inv.co_owned.append((k.kind, _ref(obj), f"also applied by {', '.join(shared)}"))
                continue
            item = Found(k.kind, meta.get("name", "?"), meta.get("namespace"), k.api_version, found_by(obj))
            _describe(
                item, obj, read, claims=claims, nodes=nodes, storage_classes=storage_classes, models=models
            )
            if meta.get("deletionTimestamp"):
                item.terminating = finalizer_text(obj)
                item.details.append(f"Terminating since {meta['deletionTimestamp']}: {item.terminating}")
            inv.found.append(item)
        others = [o for o in listed[k.kind] if not found_by(o)]
        for obj in others[:LEFT_ALONE_SHOWN]:
            by = sorted(managers(obj) - {""})
            inv.left_alone.append(
                (
                    k.kind,
                    _ref(obj),
                    f"fields managed by {', '.join(by)}" if by else "no label, no field manager",
                )
            )
        if len(others) > LEFT_ALONE_SHOWN:
            inv.left_alone.append((k.kind, f"... and {len(others) - LEFT_ALONE_SHOWN} more", ""))

    inv.orphans = _orphans(listed["NodePool"], claims, nodes)
    inv.orphan_claims = [
        _meta(c).get("name", "?")
        for c in claims
        if _node_of_claim(c).name in {n.name for n in inv.orphans} and not _meta(c).get("deletionTimestamp")
    ]

    # file systems a deleted claim left behind (Retain): the PV is Released and still billed
    for pv in read.list("PersistentVolume", "v1", False, quiet_missing=True) or []:
        csi = (pv.get("spec") or {}).get("csi") or {}
        if csi.get("driver") == FSX_PROVISIONER and (pv.get("status") or {}).get("phase") == "Released":
            inv.released.append(_volume(pv, storage_classes))

    try:  # only for a note: a refusal here is not a problem of the listing
        trainer_ns = None if namespace else cluster.get("Namespace", TRAINER_NAMESPACE, api_version="v1")
    except ClusterError:
        trainer_ns = None
    if trainer_ns is not None and found_by(trainer_ns):
        inv.kept_on_purpose.append(
            f"the Kubeflow Trainer controller (namespace {TRAINER_NAMESPACE}, installed by the workbook): "
            "its CRDs "
            "hold every TrainJob on the cluster, other people's too, and it runs on the cluster's own nodes, "
            "not "
            "the workbook's pools. Uninstall it when nobody else uses it: kubectl delete -k "
            '"https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v<the release you '
            'installed>"'
        )
    return inv


def _orphans(pools: list[dict], claims: list[dict], nodes: dict) -> list[Node]:
    """NodeClaims, and Nodes without one, labelled with a workbook pool's name whose NodePool is gone."""
    ours = set(WORKBOOK_POOLS) | {_meta(p).get("name") for p in pools if found_by(p)}
    present = {_meta(p).get("name") for p in pools}

    def orphaned(obj) -> bool:
        pool = (_meta(obj).get("labels") or {}).get("karpenter.sh/nodepool")
        return bool(pool) and pool in ours and pool not in present

    out = [_node_of_claim(c) for c in claims if orphaned(c)]
    named = {n.name for n in out}
    out += [_node_of(n) for name, n in nodes.items() if orphaned(n) and name not in named]
    return out


def _volume(pv: dict, storage_classes: dict) -> Volume:
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    fsx_id = csi.get("volumeHandle") if csi.get("driver") == FSX_PROVISIONER else None
    sc = storage_classes.get(spec.get("storageClassName")) or {}
    # the StorageClass says which deployment type it provisioned; once it is gone, nothing on the cluster does
    deployment = (csi.get("volumeAttributes") or {}).get("deploymentType") or (
        sc.get("parameters") or {}
    ).get("deploymentType")
    ref = spec.get("claimRef") or {}
    return Volume(
        name=_meta(pv).get("name", "?"),
        size_gib=gib((spec.get("capacity") or {}).get("storage")),
        fsx_id=fsx_id,
        reclaim=spec.get("persistentVolumeReclaimPolicy", "?"),
        deployment_type=deployment,
        claim=f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else "",
        phase=(pv.get("status") or {}).get("phase", ""),
    )


def _describe(
    item: Found,
    obj: dict,
    read: _Reader,
    *,
    claims: list[dict],
    nodes: dict,
    storage_classes: dict,
    models: dict[str, dict[str, str]],
) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if item.kind == "NodePool":
        item.nodes = [
            _node_of_claim(c)
            for c in claims
            if ((_meta(c).get("labels") or {}).get("karpenter.sh/nodepool")) == item.name
        ]
        item.cost = (
            f"{len(item.nodes)} node(s): {nodes_text(item.nodes)}"
            if item.nodes
            else "no nodes now (Karpenter launches them only for pending pods that fit)"
        )
    elif item.kind == "EC2NodeClass":
        item.cost = "nothing by itself (its nodes are counted under their NodePool)"
    elif item.kind == "TrainJob":
        conds = [t for t, s in _conditions(obj).items() if s == "True"]
        state = ", ".join(conds) or "no condition yet"
        pods = _pods(read, item.namespace or "default", item.name)
        pinned = sorted(
            {
                p["spec"]["nodeName"]
                for p in pods
                if (p.get("spec") or {}).get("nodeName")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            }
        )
        item.nodes = [_node_of(nodes[n]) if n in nodes else Node(n, "?") for n in pinned]
        item.cost = f"{state}; " + (
            f"its running pods pin {len(item.nodes)} node(s): {nodes_text(item.nodes)}"
            if item.nodes
            else "no running pods, no nodes held"
        )
    elif item.kind == "PersistentVolumeClaim":
        item.storage_class = spec.get("storageClassName")
        pv = read.get("PersistentVolume", spec["volumeName"], None, "v1") if spec.get("volumeName") else None
        if pv is not None:
            item.volume = _volume(pv, storage_classes)
            item.cost = item.volume.describe()
            item.details.append(
                f"volume {item.volume.name}, reclaimPolicy {item.volume.reclaim}"
                + (
                    ": deleting the claim keeps the file system (and its cost)"
                    if item.volume.reclaim == "Retain"
                    else ""
                )
            )
        else:
            size = (status.get("capacity") or {}).get("storage") or (
                (spec.get("resources") or {}).get("requests") or {}
            ).get("storage")
            item.cost = (
                f"{status.get('phase') or 'Pending'}, {size or 'size unknown'} requested: no volume bound "
                "yet (nothing billed until the file system exists)"
            )
        notes = {
            k: v for k, v in (_meta(obj).get("annotations") or {}).items() if k.startswith(MODEL_ANNOTATION)
        }
        item.models = [f"{v} (annotation {k})" for k, v in sorted(notes.items())]
        for job, path in sorted(models.get(item.ref, {}).items()):
            if notes.get(MODEL_ANNOTATION + job) != path:
                item.models.append(f"{path} (TrainJob {job} ended Complete with --save-model)")
                item.unmarked[MODEL_ANNOTATION + job] = path
        item.details += [f"holds a trained model: {m}" for m in item.models]
    elif item.kind == "StorageClass":
        item.cost = "nothing (it provisions file systems; deleting it leaves existing ones as they are)"
    elif item.kind == "ClusterTrainingRuntime":
        item.cost = "nothing (a template TrainJobs refer to)"
    elif item.kind == "Secret":
        item.cost = "nothing (the Hugging Face token)"


def _pods(read: _Reader, namespace: str, job: str) -> list[dict]:
    try:
        out = read.cluster.get(
            "Pod",
            namespace=namespace,
            api_version="v1",
            label_selector=f"jobset.sigs.k8s.io/jobset-name={job}",
        )
    except ClusterError as exc:
        read.inv.problems.append(f"cannot list the pods of TrainJob {namespace}/{job}: {exc}")
        return []
    return out.get("items") or []


# ------------------------------------------------------------------------------------------- writing
def _table(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


def listing(inv: Inventory) -> list[str]:
    """The inventory as text: the workbook's objects in deletion order with their cost, then the rest."""
    if not inv.found and inv.forbidden:
        refused = ", ".join(inv.forbidden)
        lines = [
            (
                f"Could not tell what of the workbook's is on this cluster: listing {refused} was refused "
                "(403, see below); nothing here means nothing is there."
            )
        ]
    elif not inv.found and inv.missing_namespace:
        lines = [f"Namespace {inv.missing_namespace!r} does not exist: nothing of the workbook's in it."]
    elif not inv.found and inv.orphans:
        lines = ["No object of the workbook's is left, but nodes of its pools are (below)."]
    elif not inv.found:
        lines = [
            (
                "Nothing of the workbook's on this cluster (no object labelled "
                f"{PART_OF[0]}={PART_OF[1]} or applied by field manager `{FIELD_MANAGER}`)."
            )
        ]
    else:
        lines = [
            (
                f"Created by the workbook (label {PART_OF[0]}={PART_OF[1]} or field manager "
                f"`{FIELD_MANAGER}`), "
                "in the order --yes deletes them:"
            )
        ]
        rows = [("KIND", "NAME", "FOUND BY", "WHILE IT EXISTS")]
        rows += [(f.kind, f.ref, f.found_by, f.cost) for f in inv.found]
        table = _table(rows)
        lines.append(table[0])
        pad = " " * (len(table[0]) - len("WHILE IT EXISTS"))
        for f, row in zip(inv.found, table[1:]):
            lines.append(row)
            lines += [pad + d for d in f.details]
    if inv.orphans:
        lines.append(
            "Nodes of the workbook's pools whose NodePool is gone (billed until Karpenter terminates them; "
            f"--yes waits for that): {nodes_text(inv.orphans)}"
        )
    if inv.found or inv.orphans:
        node_h, fsx_h, unknown = inv.running_cost()
        lines.append(
            f"Running cost of the above: ${node_h + fsx_h:.2f}/h known (nodes ${node_h:.2f}/h, "
            f"FSx ${fsx_h:.2f}/h)" + (f"; price unknown: {', '.join(unknown)}" if unknown else "")
        )
    if inv.released:
        lines.append(
            "Released FSx volumes on the cluster (their claims are gone; under Retain each file system still "
            "exists and is billed; teardown deletes none):"
        )
        lines += [
            f"  PersistentVolume {v.name} (was {v.claim or '?'}): {v.describe()}; remove: "
            + " && ".join(v.removal())
            for v in inv.released
        ]
    if inv.co_owned:
        lines.append(
            f"Co-owned (applied by `{FIELD_MANAGER}` and by another field manager): listed, never deleted; "
            "remove by hand once nobody else needs it:"
        )
        lines += _table([(kind, ref, why) for kind, ref, why in inv.co_owned], "  ")
    if inv.left_alone:
        lines.append(f"Left alone (same kinds, neither the label nor the field manager `{FIELD_MANAGER}`):")
        lines += _table([(kind, ref, why) for kind, ref, why in inv.left_alone], "  ")
    for note in inv.kept_on_purpose:
        lines.append(f"Not removed: {note}")
    for note in inv.skipped:
        lines.append(f"Not looked at: {note}")
    for problem in inv.problems:
        lines.append(f"Could not read: {problem}")
    if inv.found or inv.released:
        lines.append(f"Assumptions: [fsx] {FSX_PRICE_SOURCE}. EC2 nodes at on-demand prices: {PRICE_SOURCE}.")
    return lines


def _later(items: list[Found]) -> list[str]:
    """The commands that remove kept claims, their StorageClass and what is behind them, later."""
    out = []
    for f in items:
        out.append(f"kubectl delete pvc {f.name} -n {f.namespace}")
        if f.volume is not None:
            out += f.volume.removal()
    out += [
        f"kubectl delete storageclass {sc}"
        for sc in sorted({f.storage_class for f in items if f.storage_class})
    ]
    return out


def teardown(
    cluster,
    *,
    yes: bool = False,
    keep_model: bool = False,
    delete_model: bool = False,
    timeout: float = 900,
    namespace: str | None = None,
    echo: Callable[[str], None] = print,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """List (and with `yes` delete) the workbook's objects; the exit code of `workshop cluster teardown`."""
    if keep_model and delete_model:
        raise WorkshopError(
            "--keep-model and --delete-model are exclusive: keep the trained model, or delete it"
        )
    check_positive("--timeout", timeout)
    interval = POLL_S if interval is None else interval
    inv = inventory(cluster, namespace=namespace)
    for line in listing(inv):
        echo(line)
    holding = inv.with_model
    if holding and not (keep_model or delete_model):
        what = "; ".join(f"{f.kind} {f.ref}: {', '.join(f.models)}" for f in holding)
        if not yes:
            echo(
                f"Note: {what}. --yes will stop here unless --keep-model (keep the claim and its file "
                "system) "
                "or --delete-model (delete them with the rest) is given."
            )
        else:
            echo(
                f"Stopped, nothing deleted: {what}. Deleting the claim would lose the model (under "
                "reclaimPolicy "
                "Retain: leave it on a file system no claim mounts). Run "
                f"`{COMMAND} --yes --keep-model` to keep it (and the claim), or "
                f"`{COMMAND} --yes --delete-model` to delete it with everything else."
            )
            return 3
    kept = holding if keep_model else []
    kept_classes = {f.storage_class for f in kept}
    plan = [
        f for f in inv.found if f not in kept and not (f.kind == "StorageClass" and f.name in kept_classes)
    ]
    if not yes:
        if holding and not (keep_model or delete_model):
            keeping = [
                f
                for f in inv.found
                if f not in holding
                and not (f.kind == "StorageClass" and f.name in {h.storage_class for h in holding})
            ]
            echo(
                f"Dry run: nothing was deleted. `{COMMAND} --yes --keep-model` deletes {len(keeping)} of the "
                f"object(s) above, `{COMMAND} --yes --delete-model` all {len(inv.found)}; either waits until "
                "Karpenter has drained the nodes."
            )
        elif inv.found:
            skip = f" (keeping {', '.join(f.kind + ' ' + f.ref for f in kept)})" if kept else ""
            echo(
                f"Dry run: nothing was deleted. `{COMMAND} --yes"
                + (" --keep-model" if keep_model else " --delete-model" if delete_model else "")
                + f"` deletes the {len(plan)} object(s) above{skip} and waits until Karpenter has drained "
                "the "
                "nodes."
            )
        return 1 if inv.problems else 0

    failures = list(inv.problems)
    for f in kept:  # the job that says the claim holds a model is about to go: the claim records it first
        if f.unmarked:
            try:
                cluster.patch(
                    f.kind,
                    f.name,
                    f.namespace,
                    {"metadata": {"annotations": f.unmarked}},
                    api_version=f.api_version,
                )
                echo(f"recorded on {f.kind} {f.ref}: " + ", ".join(f"{k}={v}" for k, v in f.unmarked.items()))
            except ClusterError as exc:
                jobs = {(f.namespace, key[len(MODEL_ANNOTATION) :]) for key in f.unmarked}
                plan = [p for p in plan if not (p.kind == "TrainJob" and (p.namespace, p.name) in jobs)]
                failures.append(f"could not record the model on {f.kind} {f.ref}: {exc}")
                echo(
                    f"could not annotate {f.kind} {f.ref} ({exc}); TrainJob(s) "
                    f"{', '.join(j for _, j in sorted(jobs))}"
                    " kept: they are the only record that the claim holds a model"
                )
    deadline = clock() + timeout
    deleted, held = _delete_all(cluster, plan, failures, echo)
    for name in inv.orphan_claims:  # Karpenter terminates the instance of a deleted NodeClaim
        try:
            cluster.delete("NodeClaim", name, api_version="karpenter.sh/v1")
            echo(f"asked Karpenter to terminate NodeClaim {name} (its NodePool is gone)")
        except ClusterError as exc:
            failures.append(f"NodeClaim {name}: {exc}")
            echo(f"could not delete NodeClaim {name}: {exc}")
    pools = sorted({f.name for f in deleted + held if f.kind == "NodePool"} | {n.pool for n in inv.orphans})
    if pools and not _wait_drained(cluster, pools, timeout, interval, echo, clock, sleep):
        failures.append(f"NodeClaims of {', '.join(pools)} still there after {timeout:g} s")
    held = _wait_terminated(cluster, held, deadline, interval, echo, clock, sleep)
    deleted = [f for f in deleted + [f for f in plan if f.terminating] if f not in held]
    for f in deleted:
        if f.volume is not None and f.volume.reclaim == "Retain":
            echo(
                f"Left behind by {f.kind} {f.ref} (reclaimPolicy Retain, still billed): PersistentVolume "
                f"{f.volume.name}, {f.volume.describe()}. When you no longer need it: "
                + " && ".join(f.volume.removal())
            )
    if kept:
        echo(
            "Kept for the trained model: "
            + "; ".join(f"{f.kind} {f.ref}, holding {', '.join(f.models)}" for f in kept)
            + ". Remove them later with:"
        )
        for cmd in [f"{COMMAND} --yes --delete-model", "or, by hand:", *_later(kept)]:
            echo(f"  {cmd}")
    if failures:
        echo(f"Not everything was removed ({len(failures)} problem(s)): " + "; ".join(failures))
        return 1
    if held:
        echo(
            f"Not done: {len(held)} object(s) still Terminating after {timeout:g} s (deletion asked for; "
            "they go when their finalizer is removed): "
            + "; ".join(f"{f.kind} {f.ref}: {f.terminating}" for f in held)
            + f". Exit code {EXIT_TERMINATING}; run `{COMMAND}` again later to see them gone."
        )
        return EXIT_TERMINATING
    echo(
        f"Done: {len(deleted)} object(s) deleted"
        + (", no NodeClaim of the deleted pools left." if pools else ".")
    )
    return 0


def _reread(cluster, f: Found) -> dict | None:
    """The object as the server has it now; None when it is gone."""
    try:
        return cluster.get(f.kind, f.name, f.namespace, api_version=f.api_version)
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise


def _delete_all(cluster, plan: list[Found], failures: list[str], echo) -> tuple[list[Found], list[Found]]:
    """Ask for each deletion, then re-read: (gone, still there because a finalizer holds it). An object that
    was already Terminating is not deleted again: it waits with the others."""
    gone: list[Found] = []
    held: list[Found] = []
    for f in plan:
        if f.terminating:
            echo(f"{f.kind} {f.ref} is already Terminating: {f.terminating}")
            held.append(f)
            continue
        try:
            existed = cluster.delete(f.kind, f.name, f.namespace, api_version=f.api_version)
            now = _reread(cluster, f) if existed else None
        except ClusterError as exc:
            failures.append(f"{f.kind} {f.ref}: {exc}")
            echo(f"could not delete {f.kind} {f.ref}: {exc}")
            continue
        if now is None:
            gone.append(f)
            echo(f"deleted {f.kind} {f.ref}" if existed else f"{f.kind} {f.ref} was already gone")
        else:
            f.terminating = finalizer_text(now)
            held.append(f)
            echo(f"{f.kind} {f.ref}: deletion asked for, Terminating: {f.terminating}")
    return gone, held


def _wait_terminated(cluster, held: list[Found], deadline: float, interval: float, echo, clock, sleep):
    """Poll until every Terminating object is gone or the deadline passes; those still there (their
    finalizers re-read)."""
    while held:
        left = []
        for f in held:
            try:
                now = _reread(cluster, f)
            except ClusterError as exc:
                echo(f"cannot re-read {f.kind} {f.ref}: {exc}")
                left.append(f)
                continue
            if now is None:
                echo(f"deleted {f.kind} {f.ref} (its finalizer was removed)")
            else:
                f.terminating = finalizer_text(now)
                left.append(f)
        held = left
        if not held or clock() + interval > deadline:
            return held
        sleep(interval)
    return held


def _wait_drained(cluster, pools: list[str], timeout: float, interval: float, echo, clock, sleep) -> bool:
    """Poll until no NodeClaim of the deleted pools is left (Karpenter drained and terminated the nodes)."""
    selector = f"karpenter.sh/nodepool in ({','.join(sorted(pools))})"
    deadline = clock() + timeout
    last, last_said = None, -1e18
    while True:
        try:
            left = (
                cluster.get("NodeClaim", api_version="karpenter.sh/v1", label_selector=selector).get("items")
                or []
            )
        except ClusterError as exc:
            if exc.status != 404:
                echo(f"cannot list NodeClaims: {exc}")
                return False
            left = []
        names = sorted(_meta(c).get("name", "?") for c in left)
        now = clock()
        if not names:
            if last:  # only said when there was something to wait for
                echo("Karpenter has drained the nodes: no NodeClaim of " + ", ".join(pools) + " left")
            return True
        if names != last or now - last_said >= PROGRESS_S:
            echo(
                f"waiting for Karpenter to drain {len(names)} node(s) of {', '.join(pools)}: "
                f"{', '.join(names)} "
                f"({max(0.0, deadline - now):.0f} s left)"
            )
            last, last_said = names, now
        if now + interval > deadline:
            echo(
                f"timed out after {timeout:g} s: {len(names)} NodeClaim(s) left ({', '.join(names)}); "
                "Karpenter may "
                "still be draining them: `kubectl get nodeclaims`, `kubectl describe nodeclaim <name>`"
            )
            return False
        sleep(interval)


def offline_plan() -> str:
    """What the command does, for a notebook that reached no cluster."""
    return "\n".join(
        [
            (
                f"No cluster was used here. On the cluster you used, `{COMMAND}` lists every object labelled "
                f"{PART_OF[0]}={PART_OF[1]} or applied by field manager `{FIELD_MANAGER}`, with the nodes "
                "and file "
                "system each keeps paying for, and the similar objects it leaves alone; it deletes nothing."
            ),
            (
                f"`{COMMAND} --yes` then deletes them in this order: {' -> '.join(ORDER)}, and waits until "
                "Karpenter "
                "has drained the nodes (--timeout)."
            ),
            (
                "A claim that holds a trained model stops it, unless --keep-model (keep the claim and the "
                "FSx file "
                "system; the commands that remove them later are printed) or --delete-model."
            ),
            (
                "Under reclaimPolicy Retain the FSx file system outlives its claim: its id and the "
                "`aws fsx delete-file-system --file-system-id fs-...` call that ends its cost are printed."
            ),
            "Run it with the kubeconfig of that cluster: first the listing, then the deletion:",
            f"  {COMMAND}",
            f"  {COMMAND} --yes",
        ]
    )
