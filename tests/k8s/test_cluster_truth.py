"""What a real API server answers that the first fake did not (issue 35), through the workbook's own client:
logs of a pod not yet scheduled (204) or starting, waits that run together and name a missing controller, a
multi-document apply that fails half way, a missing namespace, an insecure kubeconfig."""

from __future__ import annotations

import json
import threading
import time
import warnings

import pytest

from tests.support.fake_apiserver import FakeAPIServer, status
from workshop.cli.cluster import cluster as cluster_command
from workshop.errors import WorkshopError
from workshop.k8s import api_errors, jobs, logs, trainjob, waits
from workshop.k8s import cluster as cl
from workshop.paths import MANIFESTS_DIR


@pytest.fixture()
def api(tmp_path):
    with FakeAPIServer() as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        server.cluster = cl.connect(kubeconfig=server.kubeconfig_path, quiet=True)
        yield server


def _pod(api, name, phase="Pending", waiting=None):
    statuses = [{"name": "node", "state": {"waiting": {"reason": waiting}}}] if waiting else []
    api.put(
        "v1",
        "pods",
        {
            "kind": "Pod",
            "metadata": {"name": name},
            "status": {"phase": phase, "containerStatuses": statuses},
        },
        "default",
    )


def test_following_a_pod_not_yet_scheduled_waits_with_a_message(api):
    _pod(api, "llama-node-0-0-x")
    api.logs["llama-node-0-0-x"] = ["step 1 loss 9.1", "step 2 loss 8.7"]
    api.log_script["llama-node-0-0-x"] = ["204", "204", "waiting"]
    said = []

    def scheduled_after_a_while(text):
        said.append(text)
        if len(said) == 1:  # the scheduler placed it; the kubelet pulls the image
            _pod(api, "llama-node-0-0-x", "Pending", waiting="ContainerCreating")

    lines = list(
        logs.follow_logs(api.cluster, "llama-node-0-0-x", interval=0.05, say=scheduled_after_a_while)
    )
    assert lines == ["step 1 loss 9.1", "step 2 loss 8.7"]
    assert said[0].startswith("waiting for pod default/llama-node-0-0-x to start (Pending: not scheduled yet")
    assert any("ContainerCreating" in s for s in said)


def test_a_pod_that_never_starts_is_an_error_naming_why(api):
    _pod(api, "stuck")
    api.logs["stuck"] = []
    api.log_script["stuck"] = ["204"] * 100
    with pytest.raises(WorkshopError, match=r"has not started after 0.3 s \(Pending: not scheduled yet\)"):
        list(logs.follow_logs(api.cluster, "stuck", wait_s=0.3, interval=0.05, say=None))


def test_cli_logs_of_a_pending_pod_never_prints_none(api, capsys):
    _pod(api, "pending-pod")
    api.log_script["pending-pod"] = ["204"]
    api.logs["pending-pod"] = []
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "logs", "pending-pod"])
    out = capsys.readouterr().out
    assert code == 0 and "None" not in out
    assert "no log yet: pod default/pending-pod is Pending: not scheduled yet" in out


def _nodepool(api, name, conds=None):
    obj = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}}
    if conds is not None:
        obj["status"] = {"conditions": conds}
    api.put("karpenter.sh/v1", "nodepools", obj)


def test_waits_run_together_and_name_the_missing_controller(api):
    _nodepool(api, "a")
    _nodepool(api, "b")
    _nodepool(api, "c", [{"type": "Ready", "status": "True"}])
    now, said = [0.0], []
    got = waits.wait_ready(
        api.cluster,
        [("NodePool", n, None) for n in "abc"],
        timeout=30,
        interval=5,
        echo=said.append,
        progress=False,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert got == {"NodePool/a": False, "NodePool/b": False, "NodePool/c": True}
    assert now[0] <= 30  # one deadline for all three, not 30 s each
    assert "NodePool/a: no status at all after 30 s: no Karpenter controller answered" in said[0]
    assert said[-1].startswith("left on the cluster: NodePool/a, NodePool/b;")
    assert "cluster teardown --yes` removes them" in said[-1]


def test_a_ready_false_condition_is_quoted(api):
    _nodepool(api, "a", [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady", "message": "x"}])
    said = []
    waits.wait_ready(api.cluster, [("NodePool", "a", None)], timeout=0.1, interval=0.05, echo=said.append)
    assert said[0] == "NodePool/a: Ready is False (NodeClassNotReady: x)"


def test_no_trainer_controller_is_named_when_no_rank0_pod_appears(api):
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"}}
    api.put("trainer.kubeflow.org/v1alpha1", "trainjobs", job, "default")
    with pytest.raises(WorkshopError, match="no Kubeflow Trainer controller answered"):
        list(jobs.stream_rank0(api.cluster, "j", wait_s=0.2, echo=None))


def test_a_failed_apply_names_the_documents_that_went_through(api):
    secret = trainjob.HFTokenSecret(value="hf_x").api_body()
    other = {**secret, "metadata": {**secret["metadata"], "name": "second"}}
    api.faults.append(("PATCH", "/api/v1/namespaces/default/secrets/second", 422, status(422, "bad"), None))
    with pytest.raises(api_errors.ClusterError) as err:
        api.cluster.apply([secret, other, other], validate=False)
    text = str(err.value)
    assert "document 2 of 3 failed" in text and "Documents 1-1 went through (Secret/hf-token" in text
    assert "1 after it not sent" in text


def test_a_missing_namespace_is_not_a_missing_secret(api):
    secret = trainjob.HFTokenSecret(namespace="nope")
    with pytest.raises(api_errors.ClusterError, match="namespace 'nope' does not exist") as err:
        jobs.ensure_secret(api.cluster, secret)
    assert err.value.missing_namespace == "nope" and "no token was given" not in str(err.value)


def test_a_namespace_the_workbook_applies_carries_its_label(api):
    api.cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}], validate=False)
    obj = api.objects[("v1", "namespaces", None, "ml")]
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/part-of": "workshop"}
    assert {e["manager"] for e in obj["metadata"]["managedFields"]} == {"workshop"}


def test_insecure_kubeconfig_says_it_once_and_silences_urllib3(api, tmp_path, capsys):
    config = json.loads(open(api.kubeconfig_path).read())
    config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    path = tmp_path / "insecure"
    path.write_text(json.dumps(config))
    with warnings.catch_warnings():
        cluster = cl.connect(kubeconfig=str(path))
        import urllib3

        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("x", urllib3.exceptions.InsecureRequestWarning, stacklevel=1)
        cluster.get("Secret", namespace="default")
    out = capsys.readouterr().out
    assert out.count("not verified (insecure-skip-tls-verify") == 1
    assert not caught


def _old_trainjob_text() -> str:

    text = (MANIFESTS_DIR / "trainjob-cpu-v2.2.yaml").read_text()
    return text.replace("- '2e-05'", "- 2e-05")  # what PyYAML wrote before the fix


def _lr_index() -> int:
    """Where the learning rate sits in the rendered job's args (the planner decides how many come first)."""

    import yaml

    text = (MANIFESTS_DIR / "trainjob-cpu-v2.2.yaml").read_text()
    job = next(d for d in yaml.safe_load_all(text) if d and d.get("kind") == "TrainJob")
    return job["spec"]["trainer"]["args"].index("2e-05")


def test_a_typed_patch_500_is_the_manifests_fault_said_once_not_retried(api):
    from workshop.k8s.base import load_yaml_docs

    docs = [d for d in load_yaml_docs(_old_trainjob_text()) if d["kind"] == "TrainJob"]
    with pytest.raises(api_errors.ClusterError) as err:
        api.cluster.apply(docs, validate=False)  # what kubectl would send
    text = str(err.value)
    assert err.value.status == 500 and "retries" not in text and "try again" not in text
    assert f".spec.trainer.args[{_lr_index()}]: expected string, got 2e-05" in text and "quote it" in text
    assert len([r for r in api.requests if r["method"] == "PATCH"]) == 1


def test_a_typed_patch_500_with_several_fields_names_every_field(api):
    """Two mistyped args: the server lists both (`errors:` then one line per field path); the explanation
    keeps both paths and values, not "errors: expected string, got ..." of the first."""
    from workshop.k8s.base import load_yaml_docs

    docs = [d for d in load_yaml_docs(_old_trainjob_text()) if d["kind"] == "TrainJob"]
    args = docs[0]["spec"]["trainer"]["args"]
    lr, other = _lr_index(), len(args)
    args.append(8)  # a second number among the args
    with pytest.raises(api_errors.ClusterError) as err:
        api.cluster.apply(docs, validate=False)
    text = str(err.value)
    assert f".spec.trainer.args[{lr}]: expected string, got 2e-05" in text, text
    assert f".spec.trainer.args[{other}]: expected string, got 8" in text, text
    assert "2 fields:" in text and "errors:" not in text and "plain 2e-05, 8 are not strings" in text, text


def test_cluster_apply_refuses_yesterdays_file_before_sending(api, tmp_path, capsys):
    path = tmp_path / "trainjob.yaml"
    path.write_text(_old_trainjob_text())
    api.requests.clear()
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "apply", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and f"spec.trainer.args[{_lr_index()}]: must be of type string, got number 2e-05" in err
    assert api.requests == []


CLAIM_DOC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "out", "namespace": "default"},
    "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
}


def test_cluster_delete_of_a_claim_a_pod_mounts_says_terminating_exit_4(api, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(waits, "SETTLE_S", 0.3)
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "out", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    api.cluster.apply([claim], validate=False)
    volumes = [{"name": "o", "persistentVolumeClaim": {"claimName": "out"}}]
    api.put("v1", "pods", {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"volumes": volumes}}, "default")
    path = tmp_path / "claim.yaml"
    path.write_text(json.dumps(claim))
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "delete", str(path)])
    out = capsys.readouterr().out
    assert code == 4 and "PersistentVolumeClaim/out deleted" not in out
    assert (
        "PersistentVolumeClaim/out: deletion asked for, Terminating: finalizer kubernetes.io/pvc-protection"
        in out
    )
    api.objects.pop(("v1", "pods", "default", "p"))
    api.finalize("v1", "persistentvolumeclaims", "out", "default")  # kube-controller-manager, once p is gone
    assert ("v1", "persistentvolumeclaims", "default", "out") not in api.objects


def test_cluster_delete_waits_a_moment_for_a_controller_before_saying_terminating(api, tmp_path, capsys):
    """On EKS kube-controller-manager drops pvc-protection about a second after the DELETE of a claim no pod
    mounts: that claim is "deleted", not Terminating."""
    api.pvc_protection_controller = False  # this test plays it, a little late
    api.cluster.apply([CLAIM_DOC], validate=False)
    key = ("v1", "persistentvolumeclaims", "default", "out")

    def controller():
        while key in api.objects and not api.objects[key]["metadata"].get("deletionTimestamp"):
            time.sleep(0.02)
        time.sleep(0.8)
        api.finalize("v1", "persistentvolumeclaims", "out", "default")

    thread = threading.Thread(target=controller, daemon=True)
    thread.start()
    path = tmp_path / "claim.yaml"
    path.write_text(json.dumps(CLAIM_DOC))
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "delete", str(path)])
    thread.join(5)
    out = capsys.readouterr().out
    assert code == 0 and "PersistentVolumeClaim/out deleted" in out and "Terminating" not in out


def test_run_on_cluster_without_a_trainer_says_what_is_left_and_returns(api, capsys):
    """Chapter 05 with submit and no Trainer controller: an outcome, not an exception that skips the
    chapter's clean-up listing, and the TrainJob it leaves named with what removes it."""
    job = trainjob.cpu_trainjob(
        nodes=2, cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8,
        hf_secret=trainjob.HFTokenSecret(value="hf_not_a_real_token"),
    )  # fmt: skip
    out = jobs.run_on_cluster(job, trainer="2.3.0", cluster=api.cluster, wait_s=0.3)
    said = capsys.readouterr().out
    assert out["outcome"] == "no rank-0 pod" and "no Kubeflow Trainer controller answered" in out["error"]
    assert ("trainer.kubeflow.org/v1alpha1", "trainjobs", "default", job.name) in api.objects
    assert f"Left on the cluster: TrainJob default/{job.name}" in said and "`--yes` removes it" in said
