"""The test session's kubeconfig points nowhere (tests/conftest.py): no test, notebook or subprocess can reach
a real cluster, whatever ~/.kube/config or the environment says."""

import os
import subprocess
import sys

from workshop.k8s.cluster import connect


def test_session_kubeconfig_points_at_a_closed_loopback_port(capsys):
    assert "workshop-kube-" in os.environ["KUBECONFIG"] and "KUBERNETES_SERVICE_HOST" not in os.environ
    with open(os.environ["KUBECONFIG"]) as f:
        assert "https://127.0.0.1:1" in f.read()
    assert connect(timeout=2) is None
    assert "did not answer" in capsys.readouterr().out


def test_subprocesses_inherit_it():
    r = subprocess.run(
        [sys.executable, "-m", "workshop", "cluster", "status"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 1 and "127.0.0.1:1 did not answer" in r.stdout
