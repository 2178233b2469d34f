"""`workshop cluster delete FILE` says "deleted" only for what is gone: against the fake API server, whose
finalizers keep an object Terminating as a real server does (tests/test_real_apiserver.py checks the same
against a real kube-apiserver)."""

from __future__ import annotations

import pytest
from fake_apiserver import FakeAPIServer

from workshop.k8s.base import read_yaml_docs
from workshop.k8s.cluster_cli import main as cluster_cli
from workshop.k8s.teardown import EXIT_TERMINATING

POOLS = "karpenter-cpu-amx.yaml"  # a NodePool and its EC2NodeClass


@pytest.fixture
def api(tmp_path):
    with FakeAPIServer() as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def test_delete_names_what_a_finalizer_holds_and_exits_4(api, repo, capsys):
    pool, nodeclass = read_yaml_docs(repo / "manifests" / POOLS)
    api.put("karpenter.sh/v1", "nodepools", pool)
    held = {
        **nodeclass,
        "metadata": {**nodeclass["metadata"], "finalizers": ["karpenter.k8s.aws/termination"]},
    }
    api.put("karpenter.k8s.aws/v1", "ec2nodeclasses", held)
    argv = ["--kubeconfig", str(api.kubeconfig_path), "delete", str(repo / "manifests" / POOLS)]
    rc = cluster_cli([*argv, "--timeout", "0.5"])
    out = capsys.readouterr().out
    assert rc == EXIT_TERMINATING, out
    assert f"NodePool/{pool['metadata']['name']} deleted" in out
    said = [line for line in out.splitlines() if line.startswith("EC2NodeClass/")]
    assert len(said) == 1 and "Terminating" in said[0] and "karpenter.k8s.aws/termination" in said[0], out
    assert "deleted" not in said[0]

    api.finalize("karpenter.k8s.aws/v1", "ec2nodeclasses", nodeclass["metadata"]["name"])  # Karpenter's part
    rc = cluster_cli([*argv, "--timeout", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("was not there") == 2, out


def test_delete_timeout_must_be_positive(api, repo, capsys):
    rc = cluster_cli(["delete", str(repo / "manifests" / POOLS), "--timeout", "0"])
    assert rc == 2 and "--timeout" in capsys.readouterr().err
