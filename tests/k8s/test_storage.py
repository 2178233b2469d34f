"""Outputs kept on FSx for Lustre (StorageClass + RWX claim, mounted by every node pod) or in S3 (IRSA)."""

from __future__ import annotations

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import storage as st
from workshop.k8s import trainjob as tj


def fsx(**kw):
    return st.fsx_storage(
        subnet_id="subnet-0abc12345def67890", security_group_ids="sg-0abc12345def67890", **kw
    )


def pod_of(doc, trainer):
    spec = doc["spec"]
    return (
        spec["podTemplateOverrides"][0]["spec"]
        if trainer == "2.1.0"
        else spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
            "template"
        ]["spec"]["template"]["spec"]
    )


def test_fsx_documents():
    sc, pvc = fsx().documents()
    assert sc["kind"] == "StorageClass" and sc["provisioner"] == "fsx.csi.aws.com"
    assert sc["parameters"]["subnetId"] == "subnet-0abc12345def67890" and sc["reclaimPolicy"] == "Retain"
    assert sc["mountOptions"] == ["flock"]  # huggingface_hub's cache locks work on the shared volume
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "fsx-lustre",
        "resources": {"requests": {"storage": "1200Gi"}},
    }


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"size": "100Gi"}, "1200Gi or a multiple of 2400Gi"),
        ({"deployment_type": "PERSISTENT_2"}, "per_unit_storage_throughput"),
        ({"deployment_type": "GP3"}, "allowed: SCRATCH_2"),
    ],
)
def test_bad_fsx_values_are_named(kw, match):
    with pytest.raises(WorkshopError, match=match):
        fsx(**kw)
    with pytest.raises(WorkshopError, match="subnet-0abc"):
        st.fsx_storage(subnet_id="my-subnet", security_group_ids="sg-0abc12345def67890")


@pytest.mark.parametrize("trainer", ["2.1.0", "2.2.0"])
def test_job_mounts_the_claim_writes_there_and_resumes(trainer):
    job = tj.cpu_trainjob(nodes=2, storage=fsx(), cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8)
    doc = job.to_dict(trainer)
    pod = pod_of(doc, trainer)
    assert {"name": "outputs", "persistentVolumeClaim": {"claimName": "workshop-outputs"}} in pod["volumes"]
    assert {"name": "outputs", "mountPath": "/fsx"} in pod["containers"][0]["volumeMounts"]
    args = doc["spec"]["trainer"]["args"]
    assert args[args.index("--output-dir") + 1] == "/fsx/cpu-llama3"
    for flag in ("--resume", "--save-model"):
        assert flag in args
    assert args[args.index("--save-steps") + 1] == "50" and args[args.index("--save-total-limit") + 1] == "2"
    # the real weights with the original workshop's fine-tuning settings
    assert (
        args[args.index("--model") + 1] == "meta-llama/Meta-Llama-3-8B"
        and args[args.index("--lr") + 1] == "2e-05"
    )
    assert args[args.index("--grad-accum") + 1] == "4" and args[args.index("--dataset") + 1] == "wikitext"
    assert {"name": "HF_HOME", "value": "/fsx/hf-cache"} in doc["spec"]["trainer"]["env"]
    assert tj.validate(job, trainer) == []


def test_args_are_what_the_entry_point_parses():
    from workshop.train import parse_args

    job = tj.cpu_trainjob(nodes=2, storage=fsx(), cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8)
    a = parse_args(job.train_args)
    assert (a.model, a.lr, a.save_model, a.resume, a.output_dir) == (
        "meta-llama/Meta-Llama-3-8B",
        2e-5,
        True,
        True,
        "/fsx/cpu-llama3",
    )
    scratch = parse_args(
        tj.cpu_trainjob(
            model="llama-3-8b", nodes=2, cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8
        ).train_args
    )
    assert scratch.lr == 1e-3  # random weights keep the from-scratch settings
    with pytest.raises(WorkshopError, match="unknown training argument"):
        tj.train_args("tiny", learning_rate=1)


def test_s3_outputs_use_irsa_not_credentials():
    out = st.s3_storage("s3://my-bucket/runs", service_account="workshop-trainer")
    job = tj.gpu_trainjob(nodes=2, gpus_per_node=1, efa_per_node=1, storage=out)
    doc = job.to_dict("2.2.0")
    args = doc["spec"]["trainer"]["args"]
    assert args[args.index("--sync-to") + 1] == "s3://my-bucket/runs/gpu-llama3"
    assert pod_of(doc, "2.2.0")["serviceAccountName"] == "workshop-trainer"
    assert "AWS_SECRET_ACCESS_KEY" not in str(doc) and out.documents() == []
    assert tj.validate(job, "2.2.0") == []
    with pytest.raises(WorkshopError, match="IRSA"):
        st.OutputStorage("s3", s3_uri="s3://my-bucket/x")


def test_claim_must_be_in_the_jobs_namespace():
    with pytest.raises(WorkshopError, match="own namespace"):
        tj.cpu_trainjob(
            namespace="team-a", storage=fsx(), cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8
        )


def _fsx_job():
    """A 2-node CPU TrainJob writing to FSx, as chapter 05 submits it."""
    return tj.cpu_trainjob(
        nodes=2,
        storage=fsx(),
        cpu="8",
        memory="64Gi",
        shm_size="8Gi",
        threads_per_rank=8,
        hf_secret=tj.HFTokenSecret(),
    )


def test_submit_creates_the_claim_first_and_only_a_complete_job_is_deleted():
    from tests.k8s.test_trainjob import FakeCluster
    from workshop.k8s import jobs

    job = _fsx_job()
    ok = FakeCluster(secrets={"hf-token"})
    jobs.run_on_cluster(job, cluster=ok, timeout=60, echo=None)
    assert [d["kind"] for d in ok.applied] == ["StorageClass", "PersistentVolumeClaim", "TrainJob"]
    assert ("TrainJob", "cpu-llama3") in ok.deleted
    # before the finished job goes, its claim records that it holds the model (teardown reads it)
    assert ok.patched == [
        (
            "PersistentVolumeClaim",
            "workshop-outputs",
            "default",
            {
                "metadata": {
                    "annotations": {"models.workshop.example.com/cpu-llama3": "/fsx/cpu-llama3/final"}
                }
            },
        )
    ]
    failed = FakeCluster(secrets={"hf-token"}, conditions=(("Failed", "True"),))
    out = jobs.run_on_cluster(job, cluster=failed, timeout=60, echo=None)
    assert out["outcome"] == "Failed" and ("TrainJob", "cpu-llama3") not in failed.deleted[1:]
    assert failed.patched == []  # no model, no mark


def test_a_claim_that_cannot_be_marked_keeps_the_finished_job_as_the_record(capsys):
    from tests.k8s.test_trainjob import FakeCluster
    from workshop.k8s import jobs
    from workshop.k8s.api_errors import ClusterError

    class Refusing(FakeCluster):
        def patch(self, *args, **kwargs):
            raise ClusterError(403, "the kubeconfig user 'alice' cannot patch persistentvolumeclaims")

    job = _fsx_job()
    fake = Refusing(secrets={"hf-token"})
    out = jobs.run_on_cluster(job, cluster=fake, timeout=60)
    assert out["outcome"] == "Complete" and ("TrainJob", "cpu-llama3") not in fake.deleted[1:]
    text = capsys.readouterr().out
    assert "could not mark the claim as holding the model" in text and "kept for inspection" in text
    assert jobs.saved_model(job) == ("workshop-outputs", "/fsx/cpu-llama3/final")
    assert (
        jobs.saved_model(tj.cpu_trainjob(nodes=2, cpu="8", memory="64Gi", shm_size="8Gi", threads_per_rank=8))
        is None
    )  # no claim: nothing to mark


def test_model_dir_follows_the_training_flags():
    assert st.model_dir(["--output-dir", "/fsx/j", "--save-model"], "/fsx") == "/fsx/j/final"
    assert st.model_dir(["--output-dir=/fsx/j/", "--save-model"], "/fsx/") == "/fsx/j/final"
    assert st.model_dir(["--output-dir", "/fsx/j"], "/fsx") is None  # no --save-model
    assert st.model_dir(["--output-dir", "/fsxother/j", "--save-model"], "/fsx") is None  # not on the mount
    assert st.model_dir(["--save-model"], "/fsx") is None
