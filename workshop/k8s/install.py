"""Kubeflow Trainer on the cluster, as the original workshop installed it, with checks: pinned release
manifests applied server-side, then wait until its ClusterTrainingRuntimes exist; and Karpenter's
NodePool/EC2NodeClass Ready.

The original workshop ran `kubectl apply --server-side -k
github.com/kubeflow/trainer/manifests/overlays/{manager,runtimes} ?ref=v2.1.0` and looked at `kubectl get
clustertrainingruntimes`. Here the overlays are built with `kubectl kustomize` at the pinned tag (the version
is chapter 05's `trainer_version`), applied with the same server-side apply as every other object
(`Cluster.apply`), and the wait is a loop with a timeout.
"""

from __future__ import annotations

import shutil
import subprocess
import time

from workshop.errors import WorkshopError, check_positive
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import load_yaml_docs
from workshop.k8s.trainjob import DEFAULT_RUNTIME, normalize_trainer_version
from workshop.k8s.waits import wait_ready

TRAINER_REPO = "https://github.com/kubeflow/trainer.git"
OVERLAYS = ("manager", "runtimes")  # the controller + CRDs first, then the runtimes that need them


def overlay_url(version: str, overlay: str) -> str:
    return f"{TRAINER_REPO}/manifests/overlays/{overlay}?ref=v{normalize_trainer_version(version)}"


def install_commands(version: str) -> list[str]:
    """The same install as shell commands (what the original workshop typed), pinned to `version`."""
    return [f'kubectl apply --server-side -k "{overlay_url(version, o)}"' for o in OVERLAYS] + [
        "kubectl get clustertrainingruntimes"
    ]


def overlay_documents(version: str, overlay: str, *, run=subprocess.run) -> list[dict]:
    """`kubectl kustomize <pinned overlay>` as documents (needs kubectl and access to github.com)."""

    if run is subprocess.run and shutil.which("kubectl") is None:
        raise WorkshopError(
            "kubectl is not installed; it builds the Trainer's kustomize overlays "
            f"(or run: {install_commands(version)[0]})"
        )
    r = run(
        ["kubectl", "kustomize", overlay_url(version, overlay)], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise WorkshopError(
            f"kubectl kustomize {overlay} at v{normalize_trainer_version(version)} failed: "
            f"{r.stderr.strip()[-500:]}"
        )
    return load_yaml_docs(r.stdout)


def install_trainer(cluster, version: str, *, run=subprocess.run, wait_s: float = 300) -> list[str]:
    """Apply the pinned manager overlay, then the runtimes overlay, server-side; then wait up to `wait_s`
    seconds for the runtimes. Returns one line (str) per object applied."""
    applied = []
    for overlay in OVERLAYS:
        docs = overlay_documents(version, overlay, run=run)
        crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
        rest = [d for d in docs if d.get("kind") != "CustomResourceDefinition"]
        for group in (crds, rest):  # CRDs first: the objects after them may be of those kinds
            if group:
                applied += [str(a) for a in cluster.apply(group, validate=False, field_manager="workshop")]
    wait_for_runtimes(cluster, timeout=wait_s)
    return applied


def wait_for_runtimes(
    cluster,
    names=(DEFAULT_RUNTIME,),
    *,
    timeout: float = 300,
    interval: float = 5,
    clock=time.monotonic,
    sleep=time.sleep,
) -> list[str]:
    """The names of the ClusterTrainingRuntimes found once every named one exists (what `kubectl get
    clustertrainingruntimes` showed the original workshop); waits up to `timeout` seconds, polling every
    `interval` seconds."""

    check_positive("timeout", timeout)
    deadline = clock() + timeout
    while True:
        try:
            items = cluster.get("ClusterTrainingRuntime").get("items") or []
        except ClusterError as exc:
            if exc.status != 404:
                raise
            items = []
        have = sorted(i["metadata"]["name"] for i in items)
        if all(n in have for n in names):
            return have
        if clock() + interval > deadline:
            raise WorkshopError(
                f"ClusterTrainingRuntime(s) {[n for n in names if n not in have]} missing after "
                f"{timeout:.0f} s (have: {', '.join(have) or 'none'}); is the Trainer controller "
                "running? `kubectl get pods -n kubeflow-system`"
            )
        sleep(interval)


def pools_ready(
    cluster, docs: list[dict], *, timeout: float = 300, echo=print, progress=True
) -> dict[str, bool]:
    """'Kind/name' -> Ready for each NodePool / EC2NodeClass in docs (the original workshop's `kubectl get
    nodepool,ec2nodeclass`), all waited for together with progress. An EC2NodeClass stays not-Ready when its
    subnets, security groups, AMI or role cannot be resolved; one with no status at all means no Karpenter
    controller answered (said, with what is left on the cluster)."""
    objects = [
        (d["kind"], d["metadata"]["name"], None)
        for d in docs
        if d.get("kind") in ("NodePool", "EC2NodeClass")
    ]
    return wait_ready(cluster, objects, timeout=timeout, echo=echo, progress=progress)
