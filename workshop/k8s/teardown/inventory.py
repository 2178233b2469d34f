"""The inventory: everything of the workbook's on a cluster, with what it costs, and the similar objects
left alone. Reads only."""

from __future__ import annotations

from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import PART_OF
from workshop.k8s.storage import FSX_PROVISIONER
from workshop.k8s.teardown.describe import DESCRIBERS, Seen
from workshop.k8s.teardown.model import (
    KINDS,
    WORKBOOK_POOLS,
    Found,
    Inventory,
    Kind,
    Node,
    co_owners,
    found_by,
    managers,
)
from workshop.k8s.teardown.reading import (
    Reader,
    job_models,
    meta_of,
    node_of,
    node_of_claim,
    ref_of,
    referenced_secrets,
    volume_of,
    why_held,
)

TRAINER_NAMESPACE = "kubeflow-system"
LEFT_ALONE_SHOWN = 10  # per kind; a shared cluster may have many
TRAINER_NOTE = (
    f"the Kubeflow Trainer controller (namespace {TRAINER_NAMESPACE}, installed by the workbook): its CRDs "
    "hold every TrainJob on the cluster, other people's too, and it runs on the cluster's own nodes, not "
    "the workbook's pools. Uninstall it when nobody else uses it: kubectl delete -k "
    '"https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v<the release you installed>"'
)


def inventory(cluster, *, namespace: str | None = None) -> Inventory:
    """Everything of the workbook's on the cluster, with costs, plus the similar objects left alone. Reads
    only."""
    inv = Inventory()
    read = Reader(cluster, inv, namespace)
    if namespace:
        _check_namespace(cluster, inv, namespace)
    listed = {
        k.kind: read.list(k.kind, k.api_version, k.namespaced) or [] for k in KINDS if k.kind != "Secret"
    }
    mine = {kind: [o for o in objs if found_by(o)] for kind, objs in listed.items()}
    listed["Secret"] = _secrets(read, mine["TrainJob"])
    mine["Secret"] = [o for o in listed["Secret"] if found_by(o)]

    # nodes: every NodeClaim (Karpenter's record of a node it launched) and every Node, read once
    claims = read.list("NodeClaim", "karpenter.sh/v1", False, quiet_missing=True) or []
    nodes = {meta_of(n).get("name"): n for n in read.list("Node", "v1", False, quiet_missing=True) or []}
    storage_classes = {meta_of(o).get("name"): o for o in listed["StorageClass"]}
    seen = Seen(read, claims, nodes, storage_classes, _saved_models(listed["TrainJob"]))
    for k in KINDS:
        _collect(inv, k, mine[k.kind], seen)
        _left_alone(inv, k.kind, [o for o in listed[k.kind] if not found_by(o)])

    inv.orphans = _orphans(listed["NodePool"], claims, nodes)
    orphaned = {n.name for n in inv.orphans}
    inv.orphan_claims = [
        meta_of(c).get("name", "?")
        for c in claims
        if node_of_claim(c).name in orphaned and not meta_of(c).get("deletionTimestamp")
    ]
    # file systems a deleted claim left behind (Retain): the PV is Released and still billed
    for pv in read.list("PersistentVolume", "v1", False, quiet_missing=True) or []:
        csi = (pv.get("spec") or {}).get("csi") or {}
        if csi.get("driver") == FSX_PROVISIONER and (pv.get("status") or {}).get("phase") == "Released":
            inv.released.append(volume_of(pv, storage_classes))
    if not namespace and _trainer_is_ours(cluster):
        inv.kept_on_purpose.append(TRAINER_NOTE)
    return inv


def _check_namespace(cluster, inv: Inventory, namespace: str) -> None:
    try:
        cluster.get("Namespace", namespace, api_version="v1")
    except ClusterError as exc:
        if exc.status == 404:
            inv.missing_namespace = namespace
            inv.problems.append(f"namespace {namespace!r} does not exist on this cluster (check -n)")


def _secrets(read: Reader, jobs: list[dict]) -> list[dict]:
    """The labelled Secrets, and any Secret a workbook TrainJob references (it may lack the label); never
    every Secret of the cluster."""
    selector = f"{PART_OF[0]}={PART_OF[1]}"
    secrets = {ref_of(o): o for o in read.list("Secret", "v1", True, label_selector=selector) or []}
    for job in jobs:
        ns = meta_of(job).get("namespace") or "default"
        for name in sorted(referenced_secrets(job)):
            if f"{ns}/{name}" not in secrets:
                obj = read.get("Secret", name, ns, "v1")
                if obj is not None:
                    secrets[f"{ns}/{name}"] = obj
    return list(secrets.values())


def _saved_models(jobs: list[dict]) -> dict[str, dict[str, str]]:
    """namespace/claim -> {job: path}: where Complete TrainJobs (anyone's) saved a model onto a claim."""
    models: dict[str, dict[str, str]] = {}
    for job in jobs:
        ns = meta_of(job).get("namespace") or "default"
        for claim, path in job_models(job).items():
            models.setdefault(f"{ns}/{claim}", {})[meta_of(job).get("name", "?")] = path
    return models


def _collect(inv: Inventory, k: Kind, objs: list[dict], seen: Seen) -> None:
    """The workbook's objects of one kind, described; those another field manager also applied are
    co-owned instead."""
    for obj in objs:
        meta = meta_of(obj)
        shared = co_owners(obj)
        if shared and PART_OF[0] not in (meta.get("labels") or {}):  # the label: the workbook's own file
            inv.co_owned.append((k.kind, ref_of(obj), f"also applied by {', '.join(shared)}"))
            continue
        item = Found(k.kind, meta.get("name", "?"), meta.get("namespace"), k.api_version, found_by(obj))
        DESCRIBERS[k.kind](item, obj, seen)
        if meta.get("deletionTimestamp"):
            item.terminating = why_held(seen.read.cluster, k.kind, obj)
            item.details.append(f"Terminating since {meta['deletionTimestamp']}: {item.terminating}")
        inv.found.append(item)


def _left_alone(inv: Inventory, kind: str, others: list[dict]) -> None:
    for obj in others[:LEFT_ALONE_SHOWN]:
        by = sorted(managers(obj) - {""})
        why = f"fields managed by {', '.join(by)}" if by else "no label, no field manager"
        inv.left_alone.append((kind, ref_of(obj), why))
    if len(others) > LEFT_ALONE_SHOWN:
        inv.left_alone.append((kind, f"... and {len(others) - LEFT_ALONE_SHOWN} more", ""))


def _orphans(pools: list[dict], claims: list[dict], nodes: dict) -> list[Node]:
    """NodeClaims, and Nodes without one, labelled with a workbook pool's name whose NodePool is gone."""
    ours = set(WORKBOOK_POOLS) | {meta_of(p).get("name") for p in pools if found_by(p)}
    present = {meta_of(p).get("name") for p in pools}

    def orphaned(obj) -> bool:
        pool = (meta_of(obj).get("labels") or {}).get("karpenter.sh/nodepool")
        return bool(pool) and pool in ours and pool not in present

    out = [node_of_claim(c) for c in claims if orphaned(c)]
    named = {n.name for n in out}
    out += [node_of(n) for name, n in nodes.items() if orphaned(n) and name not in named]
    return out


def _trainer_is_ours(cluster) -> bool:
    """Whether the workbook installed the Trainer controller here (only for a note: a refusal is no
    problem of the listing)."""
    try:
        return bool(found_by(cluster.get("Namespace", TRAINER_NAMESPACE, api_version="v1")))
    except ClusterError:
        return False
