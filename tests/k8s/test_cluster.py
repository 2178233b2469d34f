"""The cluster layer against a fake API server on 127.0.0.1 (tests/support/fake_apiserver.py) that records
requests."""

from __future__ import annotations

import itertools
import json
import socket

import kubernetes
import pytest

from tests.support.fake_apiserver import FakeAPIServer, status
from workshop.cli.cluster import cluster as cluster_command
from workshop.errors import WorkshopError
from workshop.k8s import api_errors
from workshop.k8s import cluster as cl
from workshop.k8s.karpenter import cpu_amx_pool

JOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "llama", "namespace": "default"},
    "spec": {"runtimeRef": {"name": "torch-distributed"}},
}


@pytest.fixture()
def api(tmp_path):
    with FakeAPIServer() as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def _connect(api):
    return cl.connect(kubeconfig=api.kubeconfig_path, quiet=True)


def _claim(name, rv, event="ADDED"):
    return {
        "type": event,
        "object": {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": name,
                "resourceVersion": str(rv),
                "labels": {"node.kubernetes.io/instance-type": "r7i.8xlarge"},
            },
            "status": {"nodeName": "ip-10-0-0-1", "conditions": [{"type": "Launched", "status": "True"}]},
        },
    }


# ------------------------------------------------------------------------------- no cluster, plainly
def test_no_kubeconfig_says_so_and_returns_none(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    assert cl.connect() is None
    assert "no cluster: no kubeconfig at" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content", [b"a: [1, 2\n  b: }\n", bytes(range(256)), b"- 1\n"], ids=["yaml", "binary", "list"]
)
def test_malformed_default_kubeconfig_says_so_and_returns_none(content, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "kc").write_bytes(content)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kc"))
    assert cl.connect() is None
    assert (
        f"no cluster: the kubeconfig could not be used (kubeconfig '{tmp_path / 'kc'}'"
        in capsys.readouterr().out
    )


def test_unreachable_server_says_so_and_returns_none(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "u"}}],
            }
        )
    )
    assert cl.connect(kubeconfig=str(kubeconfig), timeout=2) is None
    assert "did not answer" in capsys.readouterr().out


def test_cli_without_cluster_exits_1_plainly(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    assert cluster_command(["status"]) == 1
    assert "no cluster" in capsys.readouterr().out


def test_too_old_client_library_is_named_not_called_no_cluster(api, monkeypatch):
    monkeypatch.setattr(kubernetes, "__version__", "30.1.0")
    with pytest.raises(WorkshopError, match=rf"kubernetes 30.1.0 is too old .*need >= {cl.MIN_KUBERNETES}"):
        _connect(api)
    assert api.requests == []


# ------------------------------------------------------------------------------------------ apply
def test_server_side_apply_creates_through_discovery(api, capsys):
    cluster = cl.connect(kubeconfig=api.kubeconfig_path)
    assert cluster is not None and cluster.version == "v1.33.0-fake"
    assert "connected" in capsys.readouterr().out
    docs = cpu_amx_pool().to_dicts()
    results = cluster.apply(docs, dry_run=True, field_manager="workbook-ch02")
    patches = [r for r in api.requests if r["method"] == "PATCH"]
    assert [p["path"] for p in patches] == [
        "/apis/karpenter.sh/v1/nodepools/cpu-amx",
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/cpu-amx",
    ]
    for patch, doc in zip(patches, docs):
        assert patch["query"] == {"fieldManager": "workbook-ch02", "dryRun": "All"}  # no force unless asked
        assert patch["headers"]["content-type"] == "application/apply-patch+yaml"
        assert patch["headers"]["authorization"] == "Bearer secret-token"
        assert json.loads(patch["body"]) == doc
    assert str(results[0]) == "NodePool/cpu-amx applied (server dry run, nothing stored)"
    assert results[1].uid == "uid-cpu-amx"
    assert [k for k in api.objects if k[1] != "namespaces"] == []  # dry run: nothing stored
    real = cluster.apply([JOB])
    assert (
        real[0].namespace == "default"
        and ("trainer.kubeflow.org/v1alpha1", "trainjobs", "default", "llama") in api.objects
    )
    assert cluster.get("TrainJob", "llama")["spec"]["runtimeRef"]["name"] == "torch-distributed"


def test_apply_conflict_names_the_fields_and_the_other_manager(api):
    cluster = _connect(api)
    api.conflicts["llama"] = [(".spec.trainer.numNodes", "kubectl-edit")]
    with pytest.raises(api_errors.ClusterError) as err:
        cluster.apply([JOB])
    assert err.value.status == 409
    text = str(err.value)
    assert ".spec.trainer.numNodes" in text and "kubectl-edit" in text and "force=True" in text
    assert cluster.apply([JOB], force=True)[0].uid == "uid-llama"
    assert api.requests[-1]["query"]["force"] in ("true", "True")


def test_apply_validates_offline_before_any_request(api):
    cluster = _connect(api)
    bad = cpu_amx_pool().to_dicts()
    bad[1]["spec"]["instanceProfile"] = "also-a-profile"  # role XOR instanceProfile (a CEL rule)
    with pytest.raises(WorkshopError, match="exactly one of"):
        cluster.apply(bad)
    assert not [r for r in api.requests if r["method"] == "PATCH"]


def test_forbidden_says_who_cannot_do_what_where(api):
    cluster = _connect(api)
    api.faults.append(
        (
            "PATCH",
            "/apis/trainer.kubeflow.org",
            403,
            status(
                403,
                'trainjobs.trainer.kubeflow.org "llama" is forbidden: User "alice" cannot patch resource',
                "Forbidden",
            ),
            None,
        )
    )
    with pytest.raises(api_errors.ClusterError) as err:
        cluster.apply([JOB])
    assert err.value.status == 403
    assert "the kubeconfig user 'alice' cannot create or change trainjobs in namespace default" in str(
        err.value
    )
    assert "kubectl auth can-i patch trainjobs -n default" in str(err.value)


def test_missing_crd_names_the_component(tmp_path):
    groups = {gv: r for gv, r in FakeAPIServer().groups.items() if not gv.startswith("trainer.")}
    with FakeAPIServer(groups) as server:
        cluster = cl.connect(kubeconfig=server.kubeconfig(tmp_path / "kc"), quiet=True)
        with pytest.raises(
            api_errors.ClusterError,
            match="Kubeflow Trainer is not installed on this cluster: no trainjobs.trainer.kubeflow.org",
        ) as err:
            cluster.apply([JOB])
        assert err.value.status == 404
        assert not [r for r in server.requests if r["method"] == "PATCH"]


def test_429_then_success_is_retried_with_backoff(api):
    cluster = _connect(api)
    api.put("trainer.kubeflow.org/v1alpha1", "trainjobs", JOB, "default")
    api.faults.append(
        (
            "GET",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/llama",
            429,
            status(429, "too many requests", "TooManyRequests"),
            {"Retry-After": "0"},
        )
    )
    assert cluster.get("TrainJob", "llama")["metadata"]["name"] == "llama"
    gets = [r for r in api.requests if r["path"].endswith("/trainjobs/llama")]
    assert len(gets) == 2 and not api.faults


def test_503_that_never_ends_is_reported_after_the_retries(api, monkeypatch):
    monkeypatch.setattr(
        cl,
        "retries",
        lambda: __import__("urllib3").util.retry.Retry(
            total=2,
            connect=0,
            read=0,
            status=2,
            backoff_factor=0,
            status_forcelist=api_errors.RETRY_STATUSES,
            allowed_methods=None,
            raise_on_status=False,
        ),
    )
    cluster = _connect(api)
    path = "/apis/karpenter.sh/v1/nodepools/cpu-amx"
    api.faults += [("GET", path, 503, status(503, "etcd is sad", "ServiceUnavailable"), None)] * 3
    with pytest.raises(api_errors.ClusterError, match="still answering 503") as err:
        cluster.get("NodePool", "cpu-amx")
    assert err.value.status == 503 and len([r for r in api.requests if r["path"] == path]) == 3


# ------------------------------------------------------------------------------- read, watch, logs
def test_watch_resumes_from_the_last_version_when_the_stream_is_cut(api):
    cluster = _connect(api)
    api.put("karpenter.sh/v1", "nodeclaims", _claim("cpu-amx-a", 0)["object"])
    api.watch_scripts = [[_claim("cpu-amx-b", 201), "cut"], [_claim("cpu-amx-b", 202, "MODIFIED")]]
    events = list(itertools.islice(cluster.watch("NodeClaim", timeout=20), 3))
    assert [(t, o["metadata"]["name"]) for t, o in events] == [
        ("ADDED", "cpu-amx-a"),
        ("ADDED", "cpu-amx-b"),
        ("MODIFIED", "cpu-amx-b"),
    ]
    watches = [r["query"] for r in api.requests if r["query"].get("watch")]
    lists = [
        r
        for r in api.requests
        if r["path"] == "/apis/karpenter.sh/v1/nodeclaims" and not r["query"].get("watch")
    ]
    assert len(lists) == 1  # a cut is resumed, not re-listed
    assert watches[0]["resourceVersion"] == lists[0]["rv_answered"]  # the watch starts where the list ended
    assert watches[1]["resourceVersion"] == "201"  # and resumes from the last event seen


def test_watch_lists_again_after_410_gone(api):
    cluster = _connect(api)
    api.watch_scripts = [["gone"], ["status410"], [_claim("cpu-amx-c", 300)]]
    lines = list(itertools.islice(cluster.watch_nodeclaims(timeout=20), 1))
    assert lines == ["ADDED    nodeclaim/cpu-amx-c type=r7i.8xlarge node=ip-10-0-0-1 true=Launched"]
    kinds = [
        "watch" if r["query"].get("watch") else "list"
        for r in api.requests
        if r["path"] == "/apis/karpenter.sh/v1/nodeclaims"
    ]
    assert kinds == ["list", "watch", "list", "watch", "list", "watch"]


def test_logs_whole_and_followed_as_written(api):
    cluster = _connect(api)
    api.logs["trainer-0"] = ["step 1 loss 9.1", "step 2 loss 8.7", "step 3 loss 8.2"]
    assert "step 2 loss 8.7" in cluster.logs("trainer-0")
    followed = cluster.logs("trainer-0", container="node", follow=True)
    assert next(followed) == "step 1 loss 9.1"
    assert list(followed) == ["step 2 loss 8.7", "step 3 loss 8.2"]
    req = api.requests[-1]
    assert req["path"] == "/api/v1/namespaces/default/pods/trainer-0/log"
    assert req["query"]["follow"] in ("true", "True") and req["query"]["container"] == "node"
    with pytest.raises(api_errors.ClusterError, match="not found"):
        list(cluster.logs("nope", follow=True))


def test_wait_pods_and_delete(api):
    cluster = _connect(api)
    api.put(
        "karpenter.sh/v1",
        "nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "cpu-amx"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    api.put(
        "v1", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama-node-0-0-x"}}, "default"
    )
    assert cluster.wait_for("NodePool", "cpu-amx", "Ready", timeout=5, interval=0.1)
    assert not cluster.wait_for("NodePool", "other", "Ready", timeout=0.3, interval=0.1)
    assert cluster.pods("default") == ["llama-node-0-0-x"]
    api.put("trainer.kubeflow.org/v1alpha1", "trainjobs", JOB, "default")
    assert cluster.delete("TrainJob", "llama", "default") is True
    assert cluster.delete("TrainJob", "llama", "default") is False
    assert (
        api.requests[-1]["path"] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/llama"
    )
    with pytest.raises(api_errors.ClusterError, match="404"):
        cluster.delete("TrainJob", "missing", "default", missing_ok=False)
