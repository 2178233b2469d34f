"""Kubeflow Trainer's install as code: pinned overlays, CRDs applied before the objects, runtimes waited
for."""

from __future__ import annotations

import functools
import subprocess

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import install


class Fake:
    def __init__(self, runtimes_after=0):
        self.applied, self.polls, self.runtimes_after = [], 0, runtimes_after

    def apply(self, docs, dry_run=False, field_manager="workshop", *, validate=True, **kw):
        assert validate is False  # the Trainer's own manifests: no CRD schema of ours applies to them
        self.applied.append([d["kind"] for d in docs])
        return [f"{d['kind']}/{d['metadata']['name']} applied" for d in docs]

    def get(self, kind, name=None, namespace=None, **kw):
        assert kind == "ClusterTrainingRuntime"
        self.polls += 1
        names = ["deepspeed-distributed", "torch-distributed"] if self.polls > self.runtimes_after else []
        return {"items": [{"metadata": {"name": n}} for n in names]}


def fake_kustomize(cmd, **kw):
    assert cmd[:2] == ["kubectl", "kustomize"] and cmd[2].endswith("?ref=v2.3.0")
    if cmd[2].split("/overlays/")[1].startswith("manager"):
        text = (
            "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: "
            "kubeflow-trainer-controller-manager}\n---\n"
            "kind: CustomResourceDefinition\napiVersion: apiextensions.k8s.io/v1\nmetadata: {name: "
            "trainjobs.trainer.kubeflow.org}\n"
        )
    else:
        text = (
            "kind: ClusterTrainingRuntime\napiVersion: trainer.kubeflow.org/v1alpha1\n"
            "metadata: {name: torch-distributed}\n"
        )
    return subprocess.CompletedProcess(cmd, 0, text, "")


def test_install_is_pinned_crds_first_then_waits(monkeypatch):
    fake, slept = Fake(runtimes_after=2), []
    wait = functools.partial(install.wait_for_runtimes, sleep=slept.append)  # the polls' sleeps, not taken
    monkeypatch.setattr(install, "wait_for_runtimes", wait)
    install.install_trainer(fake, "v2.3", run=fake_kustomize, wait_s=60)
    assert fake.applied == [["CustomResourceDefinition"], ["Deployment"], ["ClusterTrainingRuntime"]]
    assert fake.polls == 3 and slept == [5, 5]  # two polls found no runtime yet, the third found them
    assert install.install_commands("2.3.0")[0] == (
        'kubectl apply --server-side -k "https://github.com/kubeflow/'
        'trainer.git/manifests/overlays/manager?ref=v2.3.0"'
    )
    with pytest.raises(WorkshopError, match="unknown Kubeflow Trainer version"):
        install.install_commands("9.9.9")


def test_missing_runtimes_time_out_with_a_hint():
    now = [0.0]
    with pytest.raises(WorkshopError, match=r"\['torch-distributed'\] missing.*kubeflow-system"):
        install.wait_for_runtimes(
            Fake(runtimes_after=10**6),
            timeout=20,
            interval=5,
            clock=lambda: now[0],
            sleep=lambda s: now.__setitem__(0, now[0] + s),
        )
    assert now[0] <= 20


def test_failed_kustomize_is_named():
    def broken(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "error: accumulating resources: no such ref")

    with pytest.raises(WorkshopError, match="kubectl kustomize manager at v2.1.0 failed.*no such ref"):
        install.overlay_documents("2.1.0", "manager", run=broken)
