"""The cluster layer against a fake API server on 127.0.0.1 that records what it receives."""

from __future__ import annotations

import json
import socket
import threading
import typing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import cluster as cl
from workshop.k8s.karpenter import cpu_amx_pool


class _FakeAPI(BaseHTTPRequestHandler):
    requests: typing.ClassVar[list] = []

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, obj, *, lines=None):
        body = b"".join(json.dumps(x).encode() + b"\n" for x in lines) if lines else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        self.requests.append({"method": self.command, "path": parts.path, "query": parse_qs(parts.query),
                              "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        return parts

    def do_GET(self):
        parts = self._record()
        if parts.path == "/version":
            return self._send(200, {"gitVersion": "v1.33.0-fake"})
        if parts.path == "/apis/karpenter.sh/v1/nodeclaims" and "watch=true" in parts.query:
            claim = {"metadata": {"name": "cpu-amx-abc", "labels": {"node.kubernetes.io/instance-type":
                                                                    "r7i.8xlarge"}},
                     "status": {"nodeName": "ip-10-0-0-1", "conditions": [{"type": "Launched", "status": "True"}]}}
            return self._send(200, None, lines=[{"type": "ADDED", "object": claim}])
        if parts.path == "/apis/karpenter.sh/v1/nodepools/cpu-amx":
            return self._send(200, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        if parts.path == "/api/v1/namespaces/default/pods/trainer-0/log":
            body = b"step 1 loss 9.1\nstep 2 loss 8.7\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        return self._send(404, {"kind": "Status", "message": f"{parts.path} not found"})

    def do_PATCH(self):
        parts = self._record()
        doc = json.loads(self.requests[-1]["body"])
        return self._send(200, {**doc, "metadata": {**doc["metadata"], "uid": "uid-" + parts.path.rsplit("/", 1)[-1]}})

    def do_DELETE(self):
        parts = self._record()
        if parts.path.endswith("/missing"):
            return self._send(404, {"kind": "Status", "message": "not found"})
        return self._send(200, {"kind": "Status", "status": "Success"})


@pytest.fixture()
def fake_cluster(tmp_path):
    _FakeAPI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
        "users": [{"name": "me", "user": {"token": "secret-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
    }))
    yield str(kubeconfig), _FakeAPI.requests
    server.shutdown()
    server.server_close()


def test_no_kubeconfig_says_so_and_returns_none(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    assert cl.connect() is None
    assert "no cluster: no kubeconfig at" in capsys.readouterr().out


def test_unreachable_server_says_so_and_returns_none(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "u"}}]}))
    assert cl.connect(kubeconfig=str(kubeconfig), timeout=2) is None
    assert "did not answer" in capsys.readouterr().out


def test_cli_without_cluster_exits_1_plainly(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    assert cl.main(["status"]) == 1
    assert "no cluster" in capsys.readouterr().out


def test_server_side_apply_sends_one_patch_per_object(fake_cluster, capsys):
    kubeconfig, requests = fake_cluster
    cluster = cl.connect(kubeconfig=kubeconfig)
    assert cluster is not None and cluster.version == "v1.33.0-fake"
    assert "connected" in capsys.readouterr().out
    docs = cpu_amx_pool().to_dicts()
    results = cluster.apply(docs, dry_run=True, field_manager="workbook-ch02")
    patches = [r for r in requests if r["method"] == "PATCH"]
    assert [p["path"] for p in patches] == ["/apis/karpenter.sh/v1/nodepools/cpu-amx",
                                            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/cpu-amx"]
    for patch, doc in zip(patches, docs):
        assert patch["query"] == {"fieldManager": ["workbook-ch02"], "force": ["true"], "dryRun": ["All"]}
        assert patch["headers"]["content-type"] == "application/apply-patch+yaml"
        assert patch["headers"]["authorization"] == "Bearer secret-token"
        assert json.loads(patch["body"]) == doc
    assert next(str(r) for r in results) == "NodePool/cpu-amx applied (server dry run, nothing stored)"
    assert results[1].uid == "uid-cpu-amx"


def test_apply_without_dry_run_omits_dryrun_and_secret_is_namespaced(fake_cluster):
    kubeconfig, requests = fake_cluster
    cluster = cl.connect(kubeconfig=kubeconfig, quiet=True)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token", "namespace": "train"},
              "stringData": {"HF_TOKEN": "x"}}
    cluster.apply([secret])
    patch = [r for r in requests if r["method"] == "PATCH"][-1]
    assert patch["path"] == "/api/v1/namespaces/train/secrets/hf-token"
    assert "dryRun" not in patch["query"] and patch["query"]["fieldManager"] == ["workshop"]


def test_apply_validates_offline_before_any_request(fake_cluster):
    kubeconfig, requests = fake_cluster
    cluster = cl.connect(kubeconfig=kubeconfig, quiet=True)
    bad = cpu_amx_pool().to_dicts()
    bad[1]["spec"]["instanceProfile"] = "also-a-profile"   # role XOR instanceProfile (a CEL rule)
    with pytest.raises(WorkshopError, match="exactly one of"):
        cluster.apply(bad)
    assert not [r for r in requests if r["method"] == "PATCH"]


def test_wait_watch_logs_delete(fake_cluster):
    kubeconfig, requests = fake_cluster
    cluster = cl.connect(kubeconfig=kubeconfig, quiet=True)
    assert cluster.wait_for("NodePool", "cpu-amx", "Ready", timeout=5, interval=0.1)
    assert not cluster.wait_for("NodePool", "other", "Ready", timeout=0.3, interval=0.1)
    lines = list(cluster.watch_nodeclaims(timeout=5))
    assert lines == ["ADDED    nodeclaim/cpu-amx-abc type=r7i.8xlarge node=ip-10-0-0-1 true=Launched"]
    watch_req = [r for r in requests if r["path"] == "/apis/karpenter.sh/v1/nodeclaims"][-1]
    assert watch_req["query"]["watch"] == ["true"] and watch_req["query"]["timeoutSeconds"] == ["5"]
    assert "step 2 loss 8.7" in cluster.logs("trainer-0")
    assert list(cluster.logs("trainer-0", follow=True)) == ["step 1 loss 9.1", "step 2 loss 8.7"]
    assert cluster.delete("TrainJob", "llama", "default") is True
    assert cluster.delete("TrainJob", "missing", "default") is False
    assert requests[-2]["path"] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/llama"
    with pytest.raises(cl.ClusterError, match="404"):
        cluster.delete("TrainJob", "missing", "default", missing_ok=False)
