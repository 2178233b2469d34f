"""What Trainer's admission webhook would refuse, judged before sending (a runtime the release does not ship,
the launcher's reserved env names), and what a TrainJob needs on the cluster (its runtime, Secret, claim)."""

from __future__ import annotations

import copy

import pytest

from tests.support.fake_apiserver import FakeAPIServer
from workshop.cli.cluster import cluster as cluster_command
from workshop.k8s import cluster as cl
from workshop.k8s import trainer_admission, validate
from workshop.k8s.base import read_yaml_docs
from workshop.paths import MANIFESTS_DIR

JOB_FILE = MANIFESTS_DIR / "trainjob-cpu-v2.2.yaml"


def _job() -> dict:
    return copy.deepcopy(next(d for d in read_yaml_docs(JOB_FILE) if d["kind"] == "TrainJob"))


def test_the_rendered_job_passes_the_webhook_checks_of_its_release():
    assert trainer_admission.webhook_problems(_job(), "job", "2.3.0") == []
    assert validate.validate_documents([_job()], trainer="2.3.0") == []


def test_a_runtime_the_release_does_not_ship_is_named_with_the_ones_it_does():
    job = _job()
    job["spec"]["runtimeRef"]["name"] = "torch-distributd"
    problems = validate.validate_documents([job], trainer="2.3.0")
    assert [(p.path, p.rule) for p in problems] == [("spec.runtimeRef.name", trainer_admission.RULE)]
    assert "'torch-distributd'" in problems[0].message and "torch-distributed" in problems[0].message


@pytest.mark.parametrize("name", trainer_admission.RESERVED_ENV["torch"])
def test_every_reserved_torchrun_env_name_is_refused(name):
    job = _job()
    job["spec"]["trainer"].setdefault("env", []).append({"name": name, "value": "1"})
    problems = trainer_admission.webhook_problems(job, "job", "2.3.0")
    assert [p.path for p in problems] == ["spec.trainer.env"] and name in problems[0].message


def test_a_name_that_only_looks_reserved_passes():
    job = _job()
    job["spec"]["trainer"].setdefault("env", []).append({"name": "PET_NNODES_X", "value": "1"})
    assert trainer_admission.webhook_problems(job, "job", "2.3.0") == []


def test_mpi_names_are_reserved_from_2_3_only():
    job = _job()
    job["spec"]["runtimeRef"]["name"] = "deepspeed-distributed"
    job["spec"]["trainer"].setdefault("env", []).append({"name": "OMPI_MCA_plm_rsh_args", "value": "x"})
    assert [p.path for p in trainer_admission.webhook_problems(job, "job", "2.3.0")] == ["spec.trainer.env"]
    assert trainer_admission.webhook_problems(job, "job", "2.1.0") == []


@pytest.fixture()
def api(tmp_path):
    with FakeAPIServer() as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        server.cluster = cl.connect(kubeconfig=server.kubeconfig_path, quiet=True)
        yield server


def test_missing_runtime_secret_and_claim_are_each_named(api):
    job = _job()
    said = trainer_admission.missing_on_cluster(api.cluster, [job])
    needs = trainer_admission.needs(job)
    assert needs["Secret"] and needs["PersistentVolumeClaim"], needs
    assert len(said) == 1 + len(needs["Secret"]) + len(needs["PersistentVolumeClaim"]), said
    assert any("ClusterTrainingRuntime 'torch-distributed' is not on the cluster" in s for s in said), said
    for secret in needs["Secret"]:
        assert any(f"Secret default/{secret} does not exist" in s for s in said), said
    for claim in needs["PersistentVolumeClaim"]:
        assert any(f"PersistentVolumeClaim default/{claim} does not exist" in s for s in said), said


def test_what_is_on_the_cluster_or_in_the_same_apply_is_not_missing(api):
    job = _job()
    needs = trainer_admission.needs(job)
    api.put(
        "trainer.kubeflow.org/v1alpha1",
        "clustertrainingruntimes",
        {"kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}},
    )
    for secret in needs["Secret"]:
        api.put("v1", "secrets", {"kind": "Secret", "metadata": {"name": secret}}, "default")
    claims = [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": c}}
        for c in needs["PersistentVolumeClaim"]
    ]
    assert trainer_admission.missing_on_cluster(api.cluster, [*claims, job]) == []


def test_cluster_apply_warns_of_a_missing_secret_before_sending(api, tmp_path, capsys):
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "apply", "--dry-run", str(JOB_FILE)])
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("warning: TrainJob default/")]
    assert code == 0 and any("Secret default/" in w and "does not exist" in w for w in warnings), out
