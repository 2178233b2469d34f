"""Reading the cluster for the teardown: a lister that records what it could not read instead of stopping,
and the pure readers of what one object says (its nodes, its volume, the model a job saved)."""

from __future__ import annotations

import re

from workshop.k8s.api_errors import ClusterError
from workshop.k8s.cluster import conditions
from workshop.k8s.storage import FSX_PROVISIONER, model_dir
from workshop.k8s.teardown.model import PVC_PROTECTION, Inventory, Node, Volume, finalizer_text
from workshop.plan.catalog import hourly_price


def meta_of(obj: dict) -> dict:
    """An object's metadata ({} when it has none)."""
    return obj.get("metadata") or {}


def ref_of(obj: dict) -> str:
    """'namespace/name', or 'name' for a cluster-scoped object."""
    meta = meta_of(obj)
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


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


def node_of_claim(claim: dict) -> Node:
    labels, status = meta_of(claim).get("labels") or {}, claim.get("status") or {}
    itype = labels.get("node.kubernetes.io/instance-type", "?")
    return Node(
        name=status.get("nodeName") or meta_of(claim).get("name", "?"),
        instance_type=itype,
        capacity_type=labels.get("karpenter.sh/capacity-type", ""),
        hourly_usd=hourly_price(itype, _vcpus(labels, status.get("capacity") or {})),
        pool=labels.get("karpenter.sh/nodepool", ""),
    )


def node_of(node: dict) -> Node:
    labels = meta_of(node).get("labels") or {}
    itype = labels.get("node.kubernetes.io/instance-type", "?")
    return Node(
        name=meta_of(node).get("name", "?"),
        instance_type=itype,
        capacity_type=labels.get("karpenter.sh/capacity-type", ""),
        hourly_usd=hourly_price(itype, _vcpus(labels, (node.get("status") or {}).get("capacity") or {})),
        pool=labels.get("karpenter.sh/nodepool", ""),
    )


def walk(value):
    """Every dict nested anywhere in a TrainJob's spec (volumes and mounts sit at different depths per
    form)."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)


def claim_mounts(job: dict) -> dict[str, str]:
    """claim name -> mount path, for the claims a TrainJob's pods mount (either Trainer form)."""
    volumes = {}
    for d in walk(job.get("spec") or {}):
        pvc = d.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName") and d.get("name"):
            volumes[d["name"]] = pvc["claimName"]
    mounts = {}
    for d in walk(job.get("spec") or {}):
        for m in d.get("volumeMounts") or []:
            if isinstance(m, dict) and m.get("name") in volumes and m.get("mountPath"):
                mounts[volumes[m["name"]]] = m["mountPath"]
    return mounts


def job_models(job: dict) -> dict[str, str]:
    """claim name -> where a Complete TrainJob wrote its final model on it."""
    if conditions(job).get("Complete") != "True":
        return {}
    args = [str(a) for a in ((job.get("spec") or {}).get("trainer") or {}).get("args") or []]
    out = {}
    for claim, mount in claim_mounts(job).items():
        path = model_dir(args, mount)
        if path:
            out[claim] = path
    return out


def claim_users(cluster, namespace: str, claim: str) -> list[str] | None:
    """The pods in the namespace that mount the claim and have not finished (what the PVC protection
    controller waits for); None when the pods cannot be listed."""
    try:
        pods = cluster.get("Pod", namespace=namespace, api_version="v1").get("items") or []
    except ClusterError:
        return None
    return [
        meta_of(p).get("name", "?")
        for p in pods
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and any(
            ((v or {}).get("persistentVolumeClaim") or {}).get("claimName") == claim
            for v in (p.get("spec") or {}).get("volumes") or []
        )
    ]


def why_held(cluster, kind: str, obj: dict) -> str:
    """What holds a Terminating object: its finalizers and what removes them; for a claim held by
    pvc-protection, the pods that mount it, listed (a cause is named only once it is checked)."""
    meta = meta_of(obj)
    users = None
    if kind == "PersistentVolumeClaim" and PVC_PROTECTION in (meta.get("finalizers") or []):
        users = claim_users(cluster, meta.get("namespace") or "default", meta.get("name", ""))
    return finalizer_text(obj, users)


def referenced_secrets(job: dict) -> set[str]:
    """The names of the Secrets a TrainJob's pods read a key of."""
    return {
        d["secretKeyRef"]["name"]
        for d in walk(job.get("spec") or {})
        if isinstance(d.get("secretKeyRef"), dict) and d["secretKeyRef"].get("name")
    }


class Reader:
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


def volume_of(pv: dict, storage_classes: dict) -> Volume:
    """The PersistentVolume as a Volume: size, FSx file system id, reclaim policy, deployment type."""
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
        name=meta_of(pv).get("name", "?"),
        size_gib=gib((spec.get("capacity") or {}).get("storage")),
        fsx_id=fsx_id,
        reclaim=spec.get("persistentVolumeReclaimPolicy", "?"),
        deployment_type=deployment,
        claim=f"{ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else "",
        phase=(pv.get("status") or {}).get("phase", ""),
    )


def pods_of(read: Reader, namespace: str, job: str) -> list[dict]:
    """The pods of a TrainJob (its JobSet's); [] and a recorded problem when they cannot be listed."""
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
