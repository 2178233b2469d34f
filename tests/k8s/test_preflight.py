"""`workshop cluster preflight` against the fake API server (components present, absent, too old, refused),
offline (no kubeconfig, no AWS credentials, no token: each check says what it could not check), the Hub check
against a local stand-in of the Hub's auth-check endpoint, and bad inputs (one `error:` line, exit 2)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.fake_apiserver import GROUPS, FakeAPIServer
from workshop.cli.cluster import cluster as cluster_command
from workshop.errors import WorkshopError
from workshop.k8s import crds, preflight
from workshop.k8s.base import read_yaml_docs
from workshop.k8s.cluster import connect
from workshop.k8s.preflight import aws, hub, releases
from workshop.k8s.preflight import cluster as pc
from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, NOT_NEEDED, PASS

EXTRA = {
    "apiextensions.k8s.io/v1": [("customresourcedefinitions", "CustomResourceDefinition", False)],
    "apps/v1": [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    "storage.k8s.io/v1": [("storageclasses", "StorageClass", False), ("csidrivers", "CSIDriver", False)],
    "jobset.x-k8s.io/v1alpha2": [("jobsets", "JobSet", True)],
}
BARE = {"v1": GROUPS["v1"], "apps/v1": EXTRA["apps/v1"], "storage.k8s.io/v1": EXTRA["storage.k8s.io/v1"]}
CPU_PLAN = {"instance_type": "c7i.48xlarge", "nodes": 4, "device": "cpu"}
GPU_PLAN = {"instance_type": "p4d.24xlarge", "nodes": 2, "device": "gpu"}


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No AWS credentials, no Hub token, no default kubeconfig: whatever this machine has."""
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))


def _deployment(name, image, ready=1, replicas=1):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
        "status": {"readyReplicas": ready},
    }


def _daemonset(name):
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
    }


def _store_crds(server, family, version):
    """The release's CRDs as the server stores them (the package's shipped files)."""
    folder = crds.folder(family, version, fetch_if_missing=False)
    for path in sorted(folder.glob("*.yaml")):
        for doc in read_yaml_docs(path):
            if doc.get("kind") == "CustomResourceDefinition":
                server.put("apiextensions.k8s.io/v1", "customresourcedefinitions", doc)


def _complete(server, *, karpenter="1.8.8", trainer="v2.3.0"):
    """Everything a GPU job with FSx outputs needs, as the components' installs leave it."""
    if karpenter in crds.pinned_versions("karpenter"):
        _store_crds(server, "karpenter", karpenter)
    if trainer.lstrip("v") in crds.pinned_versions("trainer"):
        _store_crds(server, "trainer", trainer.lstrip("v"))
    image = f"public.ecr.aws/karpenter/controller:{karpenter}@sha256:{'0' * 64}"
    server.put("apps/v1", "deployments", _deployment("karpenter", image, 2, 2), "kube-system")
    trainer_image = f"ghcr.io/kubeflow/trainer/trainer-controller-manager:{trainer}"
    dep = _deployment("kubeflow-trainer-controller-manager", trainer_image)
    server.put("apps/v1", "deployments", dep, "kubeflow-system")
    nodeclass = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "cpu-amx"},
        "spec": {"role": "KarpenterNodeRole-demo"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    server.put("karpenter.k8s.aws/v1", "ec2nodeclasses", nodeclass)
    runtime = {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}}
    server.put("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", runtime)
    server.put(
        "storage.k8s.io/v1", "csidrivers", {"kind": "CSIDriver", "metadata": {"name": "fsx.csi.aws.com"}}
    )
    for name in ("nvidia-device-plugin-daemonset", "aws-efa-k8s-device-plugin-daemonset"):
        server.put("apps/v1", "daemonsets", _daemonset(name), "kube-system")


@pytest.fixture()
def full(tmp_path):
    with FakeAPIServer({**GROUPS, **EXTRA}) as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        yield server


@pytest.fixture()
def bare(tmp_path):
    with FakeAPIServer(BARE) as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def _run(server, plan, **kwargs):
    cluster = connect(kubeconfig=server.kubeconfig_path, quiet=True)
    req = preflight.requirements_from_plan(plan, **kwargs)
    return preflight.run(req, cluster=cluster)


def _verdicts(report):
    return {c.name: c.verdict for c in report.checks}


# ------------------------------------------------------------------------------- components present
def test_a_complete_cluster_passes_every_cluster_check_of_a_gpu_plan(full):
    _complete(full)
    report = _run(full, GPU_PLAN, storage="fsx", model="meta-llama/Meta-Llama-3-8B")
    verdicts = _verdicts(report)
    assert all(verdicts[name] == PASS for name in pc.NAMES), verdicts
    assert (
        "Karpenter 1.8.8 (kube-system/karpenter, 2 of 2 replicas ready)"
        in report.verdict_of(pc.KARPENTER_CONTROLLER).detail
    )
    assert (
        ">= 1.5" in report.verdict_of(pc.KARPENTER_MATRIX).detail
    )  # Kubernetes 1.33 by the published matrix
    assert "cpu-amx: role KarpenterNodeRole-demo (Ready)" == report.verdict_of(pc.NODECLASS).detail
    # offline: the account and the Hub are not checked, each saying why; nothing failed, so exit 0
    assert verdicts[aws.QUOTA] == verdicts[aws.OFFERED] == verdicts[hub.HUB] == NOT_CHECKED
    assert "no AWS credentials" in report.verdict_of(aws.QUOTA).detail
    assert "HF_TOKEN is not set" in report.verdict_of(hub.HUB).detail
    assert report.exit_code == 0


def test_a_cpu_plan_with_s3_outputs_needs_no_fsx_driver_and_no_device_plugin(full):
    _complete(full)
    report = _run(full, CPU_PLAN, storage="s3")
    verdicts = _verdicts(report)
    assert verdicts[pc.FSX] == verdicts[pc.NVIDIA] == verdicts[pc.EFA] == NOT_NEEDED
    assert report.exit_code == 0


def test_a_gpu_node_that_advertises_the_resource_stands_for_the_daemonset(full):
    _complete(full)
    for key in [k for k in full.objects if k[1] == "daemonsets"]:
        del full.objects[key]
    node = {"kind": "Node", "metadata": {"name": "gpu-1"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    full.put("v1", "nodes", node)
    report = _run(full, GPU_PLAN)
    assert report.verdict_of(pc.NVIDIA).verdict == PASS
    assert "1 node(s) advertise nvidia.com/gpu" in report.verdict_of(pc.NVIDIA).detail
    efa = report.verdict_of(pc.EFA)
    assert efa.verdict == FAIL and "aws-efa-k8s-device-plugin" in efa.fix


# ------------------------------------------------------------------------------- components absent
def test_a_bare_cluster_fails_each_component_with_the_command_that_installs_it(bare):
    report = _run(bare, GPU_PLAN, storage="fsx", trainer_version="2.3.0")
    verdicts = _verdicts(report)
    for name in (pc.KARPENTER_CRDS, pc.KARPENTER_CONTROLLER, pc.TRAINER_CRDS, pc.TRAINER_CONTROLLER, pc.FSX):
        assert verdicts[name] == FAIL, name
    assert verdicts[pc.SERVER] == PASS
    fixes = {c.name: c.fix for c in report.checks}
    assert (
        "karpenter-crd" in fixes[pc.KARPENTER_CRDS]
        and "helm upgrade --install karpenter" in fixes[pc.KARPENTER_CONTROLLER]
    )
    assert (
        'kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=v2.3.0"'
        in fixes[pc.TRAINER_CRDS]
    )
    assert "aws-fsx-csi-driver" in fixes[pc.FSX]
    assert "nvidia-device-plugin" in fixes[pc.NVIDIA] and "aws-efa-k8s-device-plugin" in fixes[pc.EFA]
    # what depends on a missing CRD is not judged twice: it is not checked, and says why
    assert verdicts[pc.KARPENTER_MATRIX] == verdicts[pc.NODECLASS] == verdicts[pc.RUNTIME] == NOT_CHECKED
    assert verdicts[releases.KARPENTER_CRD_RELEASE] == verdicts[releases.TRAINER_CRD_RELEASE] == NOT_CHECKED
    assert report.exit_code == 1
    text = str(report)
    assert "[FAIL" in text and "-> helm upgrade --install karpenter-crd" in text


def test_no_torch_distributed_runtime_and_no_nodeclass_fail_with_what_applies_them(full):
    _complete(full)
    del full.objects[("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", None, "torch-distributed")]
    del full.objects[("karpenter.k8s.aws/v1", "ec2nodeclasses", None, "cpu-amx")]
    report = _run(full, CPU_PLAN)
    runtime, nodeclass = report.verdict_of(pc.RUNTIME), report.verdict_of(pc.NODECLASS)
    assert runtime.verdict == FAIL and "overlays/runtimes?ref=v2.3.0" in runtime.fix
    assert nodeclass.verdict == FAIL and "--only 02" in nodeclass.fix


def test_a_nodeclass_without_a_role_or_not_ready_fails_naming_it(full):
    _complete(full)
    full.put(
        "karpenter.k8s.aws/v1",
        "ec2nodeclasses",
        {"kind": "EC2NodeClass", "metadata": {"name": "gpu"}, "spec": {}},
    )
    full.put(
        "karpenter.k8s.aws/v1",
        "ec2nodeclasses",
        {
            "kind": "EC2NodeClass",
            "metadata": {"name": "other"},
            "spec": {"instanceProfile": "ip-1"},
            "status": {"conditions": [{"type": "Ready", "status": "False", "message": "role not found"}]},
        },
    )
    check = _run(full, CPU_PLAN).verdict_of(pc.NODECLASS)
    assert check.verdict == FAIL
    assert "gpu: neither spec.role nor spec.instanceProfile" in check.detail
    assert "other: instanceProfile ip-1, not Ready (role not found)" in check.detail


# ------------------------------------------------------------------------------- versions
def test_karpenter_older_than_the_matrix_allows_fails_with_the_upgrade(full):
    _complete(full, karpenter="1.4.0")
    check = _run(full, CPU_PLAN).verdict_of(pc.KARPENTER_MATRIX)
    assert check.verdict == FAIL
    assert "Karpenter 1.4.0 does not support Kubernetes 1.33 (it needs >= 1.5.0)" == check.detail
    assert "helm upgrade karpenter" in check.fix and "compatibility" in check.fix


def test_a_kubernetes_newer_than_the_matrix_is_not_judged(full):
    _complete(full)
    version = {
        "major": "1",
        "minor": "36",
        "gitVersion": "v1.36.2",
        "gitCommit": "0",
        "gitTreeState": "clean",
        "buildDate": "2026-06-09T00:00:00Z",
        "goVersion": "go1.26",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
    full.faults.append(("GET", "/version", 200, version, None))
    check = _run(full, CPU_PLAN).verdict_of(pc.KARPENTER_MATRIX)
    assert check.verdict == NOT_CHECKED and "Kubernetes 1.36 is outside the matrix" in check.detail


def test_a_trainer_release_other_than_the_rendered_one_fails_with_both_ways_out(full):
    _complete(full, trainer="v2.1.0")
    check = _run(full, CPU_PLAN, trainer_version="2.3.0").verdict_of(pc.TRAINER_CONTROLLER)
    assert check.verdict == FAIL and "the job is rendered for 2.3.0" in check.detail
    assert "-p trainer_version 2.1.0" in check.fix and "ref=v2.3.0" in check.fix
    assert _run(full, CPU_PLAN, trainer_version="2.1.0").verdict_of(pc.TRAINER_CONTROLLER).verdict == PASS


def test_a_controller_with_no_ready_replica_fails(full):
    _complete(full)
    image = "public.ecr.aws/karpenter/controller:1.8.8"
    full.put("apps/v1", "deployments", _deployment("karpenter", image, 0, 2), "kube-system")
    check = _run(full, CPU_PLAN).verdict_of(pc.KARPENTER_CONTROLLER)
    assert check.verdict == FAIL and "0 of 2 replicas ready" in check.detail
    assert "kubectl -n kube-system describe deployment karpenter" in check.fix


def test_a_read_the_server_refuses_is_not_checked_with_who_may_not_read_what(full):
    _complete(full)
    full.forbidden.add(("list", "deployments"))
    check = _run(full, CPU_PLAN).verdict_of(pc.KARPENTER_CONTROLLER)
    assert check.verdict == NOT_CHECKED and "forbidden" in check.detail.lower() and "alice" in check.detail


# ------------------------------------------------------------------------------- offline and the CLI
def test_offline_every_check_says_what_it_could_not_check_and_exit_is_0(capsys):
    assert cluster_command(["preflight", "--model", "meta-llama/Meta-Llama-3-8B", "--storage", "s3"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("  [")]
    assert len(lines) == len(pc.NAMES) + 3
    assert all("[not checked]" in line or "[not needed" in line for line in lines), lines
    assert (
        sum("no kubeconfig at" in line for line in lines) == len(pc.NAMES) - 3
    )  # FSx, NVIDIA, EFA not needed
    assert sum("no AWS credentials found" in line for line in lines) == 2
    assert "HF_TOKEN is not set" in out and "0 passed, 0 failed" in out


def test_cli_with_a_plan_file_from_workshop_plan_json_and_a_cluster(full, tmp_path, capsys):
    _complete(full)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"plans": [GPU_PLAN, CPU_PLAN]}))
    argv = ["preflight", "--plan", str(plan), "--kubeconfig", full.kubeconfig_path, "--storage", "fsx"]
    assert cluster_command(argv) == 0
    out = capsys.readouterr().out
    assert "2 x p4d.24xlarge (gpu)" in out and "plan 1 of 2" in out
    assert out.count("[pass") == len(pc.NAMES)
    del full.objects[("storage.k8s.io/v1", "csidrivers", None, "fsx.csi.aws.com")]
    assert cluster_command(argv) == 1
    assert "[FAIL" in capsys.readouterr().out


def test_a_cost_planner_plan_object_is_accepted():
    """Chapter 05 passes the cost planner's Plan itself: the attribute names are the plan file's keys."""
    from dataclasses import fields
    from types import SimpleNamespace

    from workshop.plan.estimate import Plan

    views = {name for name, v in vars(Plan).items() if isinstance(v, property)}  # its Job's, read through
    assert {"instance_type", "nodes", "device"} <= {f.name for f in fields(Plan)} | views
    plan = SimpleNamespace(instance_type="m7i.12xlarge", nodes=2, device="cpu")
    req = preflight.requirements_from_plan(plan, storage="fsx")
    assert (req.instance_type, req.nodes, req.device, req.storage) == ("m7i.12xlarge", 2, "cpu", "fsx")
    assert "2 x m7i.12xlarge (cpu) from the plan" in req.describe()


@pytest.mark.parametrize(
    ("content", "argv", "said"),
    [
        (None, ["--plan", "{missing}"], "does not exist"),
        ("not json", ["--plan", "{plan}"], "is not readable JSON"),
        ("[1, 2]", ["--plan", "{plan}"], "expected one JSON object"),
        ('{"plans": []}', ["--plan", "{plan}"], "holds no plan"),
        ('{"instance_type": "c7i.48xlarge", "nodes": 0, "device": "cpu"}', ["--plan", "{plan}"], "nodes 0"),
        ('{"instance_type": "c7i.48xlarge", "nodes": 2, "device": "tpu"}', ["--plan", "{plan}"], "'tpu'"),
        ('{"instance_type": "big box", "nodes": 2, "device": "cpu"}', ["--plan", "{plan}"], "'big box'"),
        (None, ["--storage", "nfs"], "unknown output storage 'nfs'; allowed: fsx, s3"),
        (None, ["--trainer-version", "9.9"], "9.9.0"),
        (None, ["--region", "mars-1"], "unknown --region 'mars-1'"),
        (None, ["--kubeconfig", "{missing}"], "--kubeconfig"),
        (None, ["--zone", "us-east-1"], "availability zone 'us-east-1'"),
        (None, ["--model", "not a model!"], "unknown model 'not a model!'"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(content, argv, said, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content)
    argv = [a.format(plan=plan, missing=tmp_path / "missing") for a in argv]
    assert cluster_command(["preflight", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and said in err[0], err


def test_a_failed_check_must_say_what_to_do():
    with pytest.raises(WorkshopError, match="without saying what to do"):
        preflight.Check("x", FAIL, "broken")


# ------------------------------------------------------------------------------- the Hub
class _Hub:
    """The Hub's auth-check endpoint on loopback: answers as huggingface.co does for each case."""

    def __init__(self, status: int, code: str | None = None):
        self.status, self.code, self.tokens = status, code, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                hub.tokens.append(self.headers.get("authorization"))
                body = b"{}"
                self.send_response(hub.status)
                if hub.code:
                    self.send_header("X-Error-Code", hub.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


MODEL, TOKEN = "meta-llama/Meta-Llama-3-8B", "hf_sEcReTtOkEnValue"


@pytest.mark.parametrize(
    ("status", "code", "verdict", "said"),
    [
        (200, None, PASS, "this token may download meta-llama/Meta-Llama-3-8B"),
        (403, "GatedRepo", FAIL, "is gated"),
        (404, "RepoNotFound", FAIL, "no model meta-llama/Meta-Llama-3-8B on the Hub"),
        (401, None, FAIL, "rejected the token"),
        (503, None, NOT_CHECKED, "hub unreachable: it answered 503"),
    ],
)
def test_hub_access_is_judged_by_the_hubs_answer_and_the_token_never_printed(
    status, code, verdict, said, monkeypatch
):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    server = _Hub(status, code)
    try:
        check = hub.hub_check(MODEL, endpoint=server.url)
    finally:
        server.close()
    assert check.verdict == verdict and said in check.detail, check
    assert server.tokens and server.tokens[0] == f"Bearer {TOKEN}"  # the token was sent ...
    assert TOKEN not in f"{check.detail} {check.fix}"  # ... and never printed
    if verdict == FAIL and code == "GatedRepo":
        assert "https://huggingface.co/meta-llama/Meta-Llama-3-8B" in check.fix


def test_hub_unreachable_is_not_checked(monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    check = hub.hub_check(MODEL, token=TOKEN, endpoint=f"http://127.0.0.1:{port}")
    assert check.verdict == NOT_CHECKED and check.detail.startswith("hub unreachable"), check


def test_a_preset_needs_no_token_and_no_token_is_not_checked():
    assert hub.hub_check("llama-3-8b", token=TOKEN).verdict == NOT_NEEDED
    no_token = hub.hub_check(MODEL)
    assert no_token.verdict == NOT_CHECKED and "HF_TOKEN is not set" in no_token.detail


def test_a_plan_file_with_job_and_placement_gives_storage_trainer_and_the_hub_model(tmp_path):
    """The shape plan/job.py's plan files take (format, trainer, job, placement): read without its loader."""
    data = {
        "format": "workshop-plan/1",
        "trainer": "2.1.0",
        "job": {"model": "llama-3-8b", "weights": "hub", "dataset": "wikitext"},
        "placement": {"instance_type": "r7i.16xlarge", "device": "cpu", "nodes": 4, "storage": "s3"},
    }
    req = preflight.requirements_from_plan(data)
    assert (req.instance_type, req.nodes, req.device) == ("r7i.16xlarge", 4, "cpu")
    assert (req.storage, req.trainer_version, req.model) == ("s3", "2.1.0", "meta-llama/Meta-Llama-3-8B")
    flags_win = preflight.requirements_from_plan(
        data, storage="fsx", trainer_version="2.3.0", model="llama-3-8b"
    )
    assert (flags_win.storage, flags_win.trainer_version, flags_win.model) == ("fsx", "2.3.0", "llama-3-8b")
    random_weights = preflight.requirements_from_plan({**data, "job": {**data["job"], "weights": "random"}})
    assert random_weights.model == "llama-3-8b"


def test_crds_of_another_release_than_the_controllers_fail_with_the_crd_chart(full):
    """helm upgrade leaves a chart's CRDs as they were: the controller runs 1.8.8 over 1.14.1's schema."""
    _complete(full)
    _store_crds(full, "karpenter", "1.14.1")
    report = _run(full, CPU_PLAN)
    check = report.verdict_of(releases.KARPENTER_CRD_RELEASE)
    assert check.verdict == FAIL and "nodepools.karpenter.sh is not 1.8.8's" in check.detail
    assert "karpenter-crd --version 1.8.8" in check.fix
    assert report.verdict_of(releases.TRAINER_CRD_RELEASE).verdict == PASS
    del full.objects[
        ("apiextensions.k8s.io/v1", "customresourcedefinitions", None, "trainjobs.trainer.kubeflow.org")
    ]
    trainer = _run(full, CPU_PLAN).verdict_of(releases.TRAINER_CRD_RELEASE)
    assert trainer.verdict == FAIL and "trainjobs.trainer.kubeflow.org is missing" in trainer.detail
    assert "overlays/manager?ref=v2.3.0" in trainer.fix


def test_a_controller_release_whose_crds_are_not_here_is_not_checked(full, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no release added to the cache either
    _complete(full, karpenter="1.9.0")
    check = _run(full, CPU_PLAN).verdict_of(releases.KARPENTER_CRD_RELEASE)
    assert check.verdict == NOT_CHECKED and "workshop crds fetch --karpenter 1.9.0" in check.detail
