"""What one found object costs while it exists, and what it holds: one describer per kind, in a table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workshop.k8s.cluster import conditions
from workshop.k8s.storage import MODEL_ANNOTATION
from workshop.k8s.teardown.model import Found, Node, nodes_text
from workshop.k8s.teardown.reading import Reader, meta_of, node_of, node_of_claim, pods_of, volume_of


@dataclass
class Seen:
    """What was read once for the whole inventory and every describer looks things up in."""

    read: Reader
    claims: list[dict]  # every NodeClaim
    nodes: dict  # node name -> Node
    storage_classes: dict  # name -> StorageClass
    models: dict[str, dict[str, str]]  # namespace/claim -> {job: where it saved its model}


def _node_pool(item: Found, obj: dict, seen: Seen) -> None:
    item.nodes = [
        node_of_claim(c)
        for c in seen.claims
        if ((meta_of(c).get("labels") or {}).get("karpenter.sh/nodepool")) == item.name
    ]
    item.cost = (
        f"{len(item.nodes)} node(s): {nodes_text(item.nodes)}"
        if item.nodes
        else "no nodes now (Karpenter launches them only for pending pods that fit)"
    )


def _train_job(item: Found, obj: dict, seen: Seen) -> None:
    state = ", ".join(t for t, s in conditions(obj).items() if s == "True") or "no condition yet"
    pods = pods_of(seen.read, item.namespace or "default", item.name)
    pinned = sorted(
        {
            p["spec"]["nodeName"]
            for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        }
    )
    item.nodes = [node_of(seen.nodes[n]) if n in seen.nodes else Node(n, "?") for n in pinned]
    item.cost = f"{state}; " + (
        f"its running pods pin {len(item.nodes)} node(s): {nodes_text(item.nodes)}"
        if item.nodes
        else "no running pods, no nodes held"
    )


def _claim(item: Found, obj: dict, seen: Seen) -> None:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    item.storage_class = spec.get("storageClassName")
    pv = seen.read.get("PersistentVolume", spec["volumeName"], None, "v1") if spec.get("volumeName") else None
    if pv is not None:
        item.volume = volume_of(pv, seen.storage_classes)
        item.cost = item.volume.describe()
        keeps = ": deleting the claim keeps the file system (and its cost)"
        item.details.append(
            f"volume {item.volume.name}, reclaimPolicy {item.volume.reclaim}"
            + (keeps if item.volume.reclaim == "Retain" else "")
        )
    else:
        size = (status.get("capacity") or {}).get("storage") or (
            (spec.get("resources") or {}).get("requests") or {}
        ).get("storage")
        item.cost = (
            f"{status.get('phase') or 'Pending'}, {size or 'size unknown'} requested: "
            "no volume bound yet (nothing billed until the file system exists)"
        )
    _models(item, obj, seen)


def _models(item: Found, obj: dict, seen: Seen) -> None:
    """Where the claim keeps a trained model: its annotations, and Complete TrainJobs that saved onto it
    (those not annotated yet are noted in `item.unmarked`, to be written before the job goes)."""
    notes = {
        k: v for k, v in (meta_of(obj).get("annotations") or {}).items() if k.startswith(MODEL_ANNOTATION)
    }
    item.models = [f"{v} (annotation {k})" for k, v in sorted(notes.items())]
    for job, path in sorted(seen.models.get(item.ref, {}).items()):
        if notes.get(MODEL_ANNOTATION + job) != path:
            item.models.append(f"{path} (TrainJob {job} ended Complete with --save-model)")
            item.unmarked[MODEL_ANNOTATION + job] = path
    item.details += [f"holds a trained model: {m}" for m in item.models]


def _costs(text: str) -> Callable[[Found, dict, Seen], None]:
    def describe(item: Found, obj: dict, seen: Seen) -> None:
        item.cost = text

    return describe


# kind -> what fills in a found object's cost, nodes, volume and models
DESCRIBERS: dict[str, Callable[[Found, dict, Seen], None]] = {
    "TrainJob": _train_job,
    "PersistentVolumeClaim": _claim,
    "StorageClass": _costs(
        "nothing (it provisions file systems; deleting it leaves existing ones as they are)"
    ),
    "NodePool": _node_pool,
    "EC2NodeClass": _costs("nothing by itself (its nodes are counted under their NodePool)"),
    "ClusterTrainingRuntime": _costs("nothing (a template TrainJobs refer to)"),
    "Secret": _costs("nothing (the Hugging Face token)"),
}
