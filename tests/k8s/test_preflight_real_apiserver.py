"""`workshop cluster preflight` against a real kube-apiserver + etcd (envtest's convention: KUBEBUILDER_ASSETS
names a folder with both binaries; skipped in one line without it), components absent and then present.

Absent: a fresh server, nothing installed. Present: the CRDs the package ships (Karpenter 1.14.1, Kubeflow
Trainer 2.1.0 and its own torch-distributed runtime) applied through the package's `Cluster.apply`, a JobSet
CRD written here (the package ships none: a stand-in that only makes the kind served), and what the
components' installs leave behind (the controllers' Deployments, the FSx CSIDriver, the device plugins'
DaemonSets), with the status a controller would write played by the test, as envtest users do."""

from __future__ import annotations

import time

import pytest

from tests.support.real_apiserver import HOW_TO_GET, RealAPIServer, assets

if assets() is None:
    pytest.skip(HOW_TO_GET, allow_module_level=True)

from workshop.cli.cluster import cluster as cluster_command  # noqa: E402
from workshop.k8s import crds, karpenter, preflight  # noqa: E402
from workshop.k8s.base import read_yaml_docs  # noqa: E402
from workshop.k8s.cluster import conditions, connect  # noqa: E402
from workshop.k8s.preflight import cluster as pc  # noqa: E402
from workshop.k8s.preflight.matrix import KARPENTER_MIN_FOR, parse_version  # noqa: E402
from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, PASS  # noqa: E402

pytestmark = pytest.mark.real_apiserver

KARPENTER, TRAINER = "1.14.1", "2.1.0"  # Trainer 2.1.0 ships its torch-distributed runtime in the package
CRD_API = "apiextensions.k8s.io/v1"
GPU_PLAN = {"instance_type": "p4d.24xlarge", "nodes": 2, "device": "gpu"}
JOBSET_CRD = {
    "apiVersion": CRD_API,
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {
        "group": "jobset.x-k8s.io",
        "names": {"kind": "JobSet", "listKind": "JobSetList", "plural": "jobsets", "singular": "jobset"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def _established(cluster, names, timeout=60):
    deadline = time.monotonic() + timeout
    for name in names:
        while (
            conditions(cluster.get("CustomResourceDefinition", name, api_version=CRD_API)).get("Established")
            != "True"
        ):
            assert time.monotonic() < deadline, f"CRD {name} not Established after {timeout} s"
            time.sleep(0.2)


def _install_shipped(cluster, family, version):
    folder = crds.folder(family, version, fetch_if_missing=False)
    docs = [
        d
        for p in sorted(folder.glob("*.yaml"))
        for d in read_yaml_docs(p)
        if d.get("kind") == "CustomResourceDefinition"
    ]
    cluster.apply(docs, validate=False, force=True)
    _established(cluster, [d["metadata"]["name"] for d in docs])


def _deployment(name, namespace, image):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


def _daemonset(name):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x:1"}]},
            },
        },
    }


def _ready(server, namespace, name):
    """Play the deployment controller: one ready replica."""
    code, body = server.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status",
        {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}},
        content_type="application/merge-patch+json",
    )
    assert code == 200, body


@pytest.fixture(scope="module")
def server():
    srv = RealAPIServer(assets()).start()
    try:
        srv.kubeconfig(srv.workdir / "admin.kubeconfig")
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _offline_account(monkeypatch, tmp_path):
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _report(server, **kwargs):
    cluster = connect(kubeconfig=str(server.workdir / "admin.kubeconfig"), quiet=True)
    assert cluster is not None, server.log_tail()
    req = preflight.requirements_from_plan(GPU_PLAN, storage="fsx", trainer_version=TRAINER, **kwargs)
    return preflight.run(req, cluster=cluster)


def test_1_a_bare_server_fails_every_component_with_what_installs_it(server):
    report = _report(server)
    verdicts = {c.name: c.verdict for c in report.checks}
    assert verdicts[pc.SERVER] == PASS and server.version() in report.verdict_of(pc.SERVER).detail
    for name in (pc.KARPENTER_CRDS, pc.KARPENTER_CONTROLLER, pc.TRAINER_CRDS, pc.TRAINER_CONTROLLER, pc.FSX):
        assert verdicts[name] == FAIL, (name, report.verdict_of(name))
    assert verdicts[pc.NVIDIA] == verdicts[pc.EFA] == FAIL
    assert verdicts[pc.NODECLASS] == verdicts[pc.RUNTIME] == NOT_CHECKED
    assert "NodePool (karpenter.sh/v1)" in report.verdict_of(pc.KARPENTER_CRDS).detail
    assert "JobSet (jobset.x-k8s.io/v1alpha2)" in report.verdict_of(pc.TRAINER_CRDS).detail
    assert report.exit_code == 1


def test_2_with_the_shipped_crds_and_the_components_every_cluster_check_passes(server, capsys):
    admin = connect(kubeconfig=str(server.workdir / "admin.kubeconfig"), quiet=True)
    _install_shipped(admin, "karpenter", KARPENTER)
    _install_shipped(admin, "trainer", TRAINER)
    admin.apply([JOBSET_CRD], validate=False)
    _established(admin, [JOBSET_CRD["metadata"]["name"]])
    runtime = crds.folder("trainer", TRAINER, fetch_if_missing=False) / "runtimes" / "torch_distributed.yaml"
    admin.apply(read_yaml_docs(runtime), trainer=TRAINER)
    pool = karpenter.cpu_amx_pool(cluster="envtest", role="KarpenterNodeRole-envtest")
    admin.apply([d for d in pool.to_dicts() if d["kind"] == "EC2NodeClass"], karpenter=KARPENTER)
    admin.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow-system"}}])
    admin.apply(
        [
            _deployment(
                "karpenter",
                "kube-system",
                f"public.ecr.aws/karpenter/controller:{KARPENTER}@sha256:{'0' * 64}",
            ),
            _deployment(
                "kubeflow-trainer-controller-manager",
                "kubeflow-system",
                f"ghcr.io/kubeflow/trainer/trainer-controller-manager:v{TRAINER}",
            ),
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": "fsx.csi.aws.com"},
                "spec": {},
            },
            _daemonset("nvidia-device-plugin-daemonset"),
            _daemonset("aws-efa-k8s-device-plugin-daemonset"),
        ]
    )
    _ready(server, "kube-system", "karpenter")
    _ready(server, "kubeflow-system", "kubeflow-trainer-controller-manager")
    report = _report(server)
    verdicts = {c.name: c.verdict for c in report.checks}
    # the matrix is judged only for a Kubernetes minor it lists; this server's may be newer
    minor = parse_version(server.version())[:2]
    matrix = PASS if minor in KARPENTER_MIN_FOR else NOT_CHECKED
    assert verdicts.pop(pc.KARPENTER_MATRIX) == matrix, report.verdict_of(pc.KARPENTER_MATRIX)
    assert all(verdicts[name] == PASS for name in pc.NAMES if name != pc.KARPENTER_MATRIX), str(report)
    assert "cpu-amx: role KarpenterNodeRole-envtest" in report.verdict_of(pc.NODECLASS).detail
    assert f"Kubeflow Trainer v{TRAINER}" in report.verdict_of(pc.TRAINER_CONTROLLER).detail
    assert report.exit_code == 0
    # the command says the same; a job rendered for another Trainer release is a failure naming both
    kubeconfig = str(server.workdir / "admin.kubeconfig")
    argv = ["preflight", "--kubeconfig", kubeconfig, "--trainer-version", TRAINER, "--storage", "fsx"]
    assert cluster_command(argv) == 0
    assert cluster_command([*argv[:3], "--trainer-version", "2.3.0"]) == 1
    assert "-p trainer_version 2.1.0" in capsys.readouterr().out
