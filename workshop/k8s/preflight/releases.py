"""Do the cluster's CRDs belong to the release its controller runs?

Helm installs a chart's CRDs once and never upgrades them, so after `helm upgrade karpenter` the controller
can be a release ahead of its NodePool schema (Karpenter's upgrade guide: upgrade the karpenter-crd chart
first). Each CRD the release ships is compared, version by version, with what the server stores
(`spec.versions[].schema.openAPIV3Schema`); the release's files are the package's pinned ones or those added
with `workshop crds fetch`, checked against their digests as every validation reads them."""

from __future__ import annotations

from workshop.errors import WorkshopError
from workshop.k8s import crds
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import read_yaml_docs
from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, PASS, Check
from workshop.lang import N_, _

KARPENTER_CRD_RELEASE = N_("Karpenter CRDs match the controller")
TRAINER_CRD_RELEASE = N_("Kubeflow Trainer CRDs match the controller")
CRD_API = "apiextensions.k8s.io/v1"


def _schemas(crd: dict) -> dict[str, dict]:
    return {
        v.get("name"): ((v.get("schema") or {}).get("openAPIV3Schema") or {})
        for v in (crd.get("spec") or {}).get("versions") or []
    }


def crd_release_check(cluster, family: str, release: str | None, fix: str) -> Check:
    """One verdict: every CRD of `family`'s `release` stored on the server exactly as the release ships it.
    `fix` is the command that installs that release's CRDs."""
    name = KARPENTER_CRD_RELEASE if family == "karpenter" else TRAINER_CRD_RELEASE
    if not release:
        return Check(name, NOT_CHECKED, _("no controller release to compare with"))
    try:
        folder = crds.folder(family, release, fetch_if_missing=False)
    except WorkshopError:
        return Check(
            name,
            NOT_CHECKED,
            _("{release}'s CRD files are not on this machine: {add}").format(
                release=release, add=f"python -m workshop crds fetch --{family} {release}"
            ),
        )
    shipped = [d for p in sorted(folder.glob("*.yaml")) for d in read_yaml_docs(p)]
    differ = []
    for doc in (d for d in shipped if d.get("kind") == "CustomResourceDefinition"):
        crd_name = doc["metadata"]["name"]
        try:
            stored = cluster.get("CustomResourceDefinition", crd_name, api_version=CRD_API)
        except ClusterError as exc:
            if exc.status != 404:
                raise
            differ.append(_("{crd} is missing").format(crd=crd_name))
            continue
        if _schemas(stored) != _schemas(doc):
            differ.append(_("{crd} is not {release}'s").format(crd=crd_name, release=release))
    if differ:
        return Check(name, FAIL, "; ".join(differ), fix)
    return Check(name, PASS, _("the server stores {release}'s CRDs as released").format(release=release))
