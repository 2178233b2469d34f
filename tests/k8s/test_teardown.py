"""`workshop cluster teardown` against the loopback fake API server (tests/support/fake_apiserver.py), seeded
with what chapters 02 and 05 apply, built by the workbook's own builders and sent through its own server-side
apply."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.fake_apiserver import FakeAPIServer, managed_fields, status
from workshop.cli.cluster import cluster as cluster_command
from workshop.k8s import cluster as cl
from workshop.k8s import karpenter, storage, teardown, trainjob
from workshop.k8s.teardown import delete, model

FSX_ID = "fs-0123456789abcdef0"
PV = "pvc-3f1c2b7a"
NS = "default"
TRAINER = "trainer.kubeflow.org/v1alpha1"
RUNTIME = {
    "apiVersion": TRAINER,
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {}}]}},
    },
}
# the API paths each kind is deleted at, in the order the teardown must delete them
DELETE_ORDER = [
    f"/apis/{TRAINER}/namespaces/{NS}/trainjobs/cpu-llama3",
    f"/api/v1/namespaces/{NS}/persistentvolumeclaims/workshop-outputs",
    "/apis/storage.k8s.io/v1/storageclasses/fsx-lustre",
    "/apis/karpenter.sh/v1/nodepools/cpu-amx",
    "/apis/karpenter.sh/v1/nodepools/gpu",
    "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/cpu-amx",
    "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/gpu",
    f"/apis/{TRAINER}/clustertrainingruntimes/torch-distributed",
    f"/api/v1/namespaces/{NS}/secrets/hf-token",
]


def _fsx():
    return storage.fsx_storage(subnet_id=storage.EXAMPLE_SUBNET, security_group_ids=[storage.EXAMPLE_SG])


def _job():
    return trainjob.cpu_trainjob(
        nodes=2,
        storage=_fsx(),
        cpu="8",
        memory="64Gi",
        shm_size="8Gi",
        threads_per_rank=8,
        hf_secret=trainjob.HFTokenSecret(value="hf_not_a_real_token"),
    )


def _seed(api, cluster, drain_after: float = 0.2):
    """What chapter 02 and chapter 05 leave on a cluster, applied the workbook's way, plus what the cluster's
    own controllers made of it (Karpenter's NodeClaims and Nodes, the job's pods, the FSx volume)."""
    pool = karpenter.pool_from_recommendation({"instance_type": "r7i.48xlarge", "nodes": 2})
    cluster.apply(pool.to_dicts() + karpenter.gpu_pool().to_dicts(), karpenter="1.14.1")  # chapter 02
    assert pool.node_pool.name == "cpu-amx"
    cluster.apply([RUNTIME], validate=False)  # chapter 05's install_trainer
    cluster.apply(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow-system"}}], validate=False
    )
    job = _job()
    cluster.apply([job.hf_secret.api_body()], namespace=NS, validate=False)  # jobs.ensure_secret
    cluster.apply(job.storage.documents(), namespace=NS, validate=False)  # jobs.submit: the claim first
    cluster.apply(job.documents("2.2.0"), namespace=NS, trainer="2.3.0")  # then the TrainJob
    # the FSx CSI driver bound the claim to a new file system (Retain: it outlives the claim)
    claim = api.objects[("v1", "persistentvolumeclaims", NS, "workshop-outputs")]
    claim["spec"]["volumeName"] = PV
    claim["status"] = {"phase": "Bound", "capacity": {"storage": "1200Gi"}}
    api.put(
        "v1",
        "persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": PV,
                "annotations": {"pv.kubernetes.io/provisioned-by": storage.FSX_PROVISIONER},
                "managedFields": managed_fields("csi-provisioner", "Update"),
            },
            "spec": {
                "capacity": {"storage": "1200Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "fsx-lustre",
                "claimRef": {"namespace": NS, "name": "workshop-outputs"},
                "csi": {
                    "driver": storage.FSX_PROVISIONER,
                    "volumeHandle": FSX_ID,
                    "volumeAttributes": {"dnsname": f"{FSX_ID}.fsx.us-west-2.amazonaws.com"},
                },
            },
            "status": {"phase": "Bound"},
        },
    )
    # Karpenter launched two r7i.48xlarge for the job's pods; the pods run there
    for i in range(2):
        node = f"ip-10-0-1-{i + 1}.ec2.internal"
        labels = {
            "karpenter.sh/nodepool": "cpu-amx",
            "node.kubernetes.io/instance-type": "r7i.48xlarge",
            "karpenter.sh/capacity-type": "on-demand",
            "karpenter.k8s.aws/instance-cpu": "192",
        }
        api.put(
            "karpenter.sh/v1",
            "nodeclaims",
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": f"cpu-amx-{'ab'[i]}x7k2", "labels": labels},
                "status": {"nodeName": node},
            },
        )
        api.put(
            "v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}}
        )
        api.put(
            "v1",
            "pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"cpu-llama3-node-0-{i}-q8z4m",
                    "namespace": NS,
                    "labels": {"jobset.sigs.k8s.io/jobset-name": "cpu-llama3"},
                },
                "spec": {"nodeName": node},
                "status": {"phase": "Running"},
            },
            NS,
        )
    _play_controllers(api, drain_after)
    api.requests.clear()  # the tests look at what teardown sends
    return job


def _seed_foreign(api):
    """Someone else's objects of the same kinds: no workbook label, other field managers."""
    api.put(
        "karpenter.sh/v1",
        "nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {
                "name": "team-gpu",
                "managedFields": managed_fields("kubectl", "Apply", "karpenter.sh/v1"),
            },
            "spec": {},
        },
    )
    api.put(
        "karpenter.k8s.aws/v1",
        "ec2nodeclasses",
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {},
        },
    )
    api.put(
        TRAINER,
        "trainjobs",
        {
            "apiVersion": TRAINER,
            "kind": "TrainJob",
            "metadata": {
                "name": "their-job",
                "namespace": "team-a",
                "labels": {"app.kubernetes.io/part-of": "team-a"},
                "managedFields": managed_fields("kubectl-client-side-apply", "Update", TRAINER),
            },
            "spec": {},
        },
        "team-a",
    )
    api.put(
        TRAINER,
        "clustertrainingruntimes",
        {
            "apiVersion": TRAINER,
            "kind": "ClusterTrainingRuntime",
            "metadata": {
                "name": "deepspeed-distributed",
                "managedFields": managed_fields("kubectl", "Apply", TRAINER),
            },
        },
    )
    api.put(
        "v1",
        "persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "team-a"},
            "spec": {},
        },
        "team-a",
    )
    return [
        ("karpenter.sh/v1", "nodepools", None, "team-gpu"),
        ("karpenter.k8s.aws/v1", "ec2nodeclasses", None, "default"),
        (TRAINER, "trainjobs", "team-a", "their-job"),
        (TRAINER, "clustertrainingruntimes", None, "deepspeed-distributed"),
        ("v1", "persistentvolumeclaims", "team-a", "data"),
    ]


def _play_controllers(api, drain_after: float = 0.2):
    """What the cluster's controllers do on deletion: the JobSet's pods go with their TrainJob, a claim's
    Retain'ed volume turns Released, and Karpenter drains and removes a deleted pool's nodes a moment
    later."""

    def karpenter_drains(pool):
        for key in [
            k
            for k, o in api.objects.items()
            if k[1] in ("nodeclaims", "nodes")
            and (o["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool
        ]:
            api.objects.pop(key, None)

    def hook(key, obj):
        _gv, plural, _ns, name = key
        if plural == "trainjobs":
            for k in [
                k
                for k, o in api.objects.items()
                if k[1] == "pods"
                and (o["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == name
            ]:
                api.objects.pop(k)
        elif plural == "persistentvolumeclaims":
            volume = api.objects.get(("v1", "persistentvolumes", None, obj["spec"].get("volumeName")))
            if volume is not None:
                volume["status"]["phase"] = "Released"
        elif plural == "nodepools":
            timer = threading.Timer(drain_after, karpenter_drains, [name])
            timer.daemon = True
            timer.start()

    api.on_delete.append(hook)


def _complete(api, name="cpu-llama3"):
    job = api.objects[(TRAINER, "trainjobs", NS, name)]
    job["status"] = {
        "conditions": [{"type": "Created", "status": "True"}, {"type": "Complete", "status": "True"}]
    }


def _deletes(api) -> list[str]:
    return [r["path"] for r in api.requests if r["method"] == "DELETE"]


@pytest.fixture()
def api(tmp_path, monkeypatch):
    monkeypatch.setattr(delete, "POLL_S", 0.05)
    with FakeAPIServer() as server:
        server.kubeconfig_path = server.kubeconfig(tmp_path / "kubeconfig")
        server.cluster = cl.connect(kubeconfig=server.kubeconfig_path, quiet=True)
        server.requests.clear()
        yield server


def _run(api, *flags, capsys=None):
    code = cluster_command(["--kubeconfig", api.kubeconfig_path, "teardown", *flags])
    out = capsys.readouterr() if capsys else None
    return code, out


# ------------------------------------------------------------------------------------------ dry run
def test_dry_run_lists_everything_with_its_cost_and_deletes_nothing(api, capsys):
    _seed(api, api.cluster)
    before = {k: dict(v) for k, v in api.objects.items()}
    code, out = _run(api, capsys=capsys)
    text = out.out
    assert code == 0, out
    assert not _deletes(api) and not [r for r in api.requests if r["method"] in ("PATCH", "POST")]
    assert api.objects.keys() == before.keys()
    rows = [line.split()[:2] for line in text.splitlines() if line.startswith("  ")]
    for kind, ref in [
        ("TrainJob", "default/cpu-llama3"),
        ("PersistentVolumeClaim", "default/workshop-outputs"),
        ("StorageClass", "fsx-lustre"),
        ("NodePool", "cpu-amx"),
        ("NodePool", "gpu"),
        ("EC2NodeClass", "cpu-amx"),
        ("EC2NodeClass", "gpu"),
        ("ClusterTrainingRuntime", "torch-distributed"),
        ("Secret", "default/hf-token"),
    ]:
        assert [kind, ref] in rows, (kind, ref, text)
    kinds = [r[0] for r in rows if r[0] in model.ORDER]
    assert kinds == sorted(kinds, key=model.ORDER.index)  # listed in deletion order
    # what each costs: the pool's nodes at the catalog's price, the FSx file system by id and size, the job's
    # nodes
    r7i = 0.1323 / 2 * 192
    nodes = (
        f"2 x r7i.48xlarge on-demand, ${r7i:.2f}/h each (ip-10-0-1-1.ec2.internal, ip-10-0-1-2.ec2.internal)"
    )
    assert text.count(nodes) == 2  # under the pool, and the same two under the job whose pods run there
    assert "its running pods pin 2 node(s)" in text and "no nodes now" in text  # the gpu pool has none
    assert f"FSx for Lustre {FSX_ID}, 1200 GiB: $0.23/h (~$168/month) [fsx]" in text
    assert f"volume {PV}, reclaimPolicy Retain: deleting the claim keeps the file system" in text
    assert (
        f"Running cost of the above: ${2 * r7i + 0.23:.2f}/h known (nodes ${2 * r7i:.2f}/h, FSx $0.23/h)"
        in text
    )
    assert (
        "$0.140 per GB-month" in text and "aws.amazon.com/fsx/lustre/pricing" in text
    )  # the assumption, sourced
    assert "label + field manager" in text  # every seeded object carries both marks
    runtime = next(
        line
        for line in text.splitlines()
        if line.split()[:2] == ["ClusterTrainingRuntime", "torch-distributed"]
    )
    assert (
        " field manager " in runtime and " label " not in runtime
    )  # upstream's runtime: the manager marks it
    assert "Not removed: the Kubeflow Trainer controller (namespace kubeflow-system" in text
    assert (
        "Dry run: nothing was deleted. `python -m workshop cluster teardown --yes` deletes the 9 object(s)"
        in text
    )
    assert "hf_not_a_real_token" not in text


def test_unpriced_instance_types_are_unknown_not_guessed(api, capsys):
    _seed(api, api.cluster)
    api.put(
        "karpenter.sh/v1",
        "nodeclaims",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "gpu-zz9",
                "labels": {
                    "karpenter.sh/nodepool": "gpu",
                    "node.kubernetes.io/instance-type": "p5e.48xlarge",
                    "karpenter.sh/capacity-type": "spot",
                },
            },
            "status": {"nodeName": "ip-10-0-9-9"},
        },
    )
    code, out = _run(api, capsys=capsys)
    assert code == 0
    assert "1 x p5e.48xlarge spot, price unknown (ip-10-0-9-9)" in out.out
    assert "price unknown: p5e.48xlarge (ip-10-0-9-9)" in out.out


# ---------------------------------------------------------------------------------------------- --yes
def test_yes_deletes_in_dependency_order_and_waits_for_karpenter(api, capsys):
    _seed(api, api.cluster, drain_after=1.0)
    code, out = _run(api, "--yes", "--timeout", "30", capsys=capsys)
    assert code == 0, out
    assert _deletes(api) == DELETE_ORDER
    left = {k for k, o in api.objects.items() if model.found_by(o)}
    assert left == {("v1", "namespaces", None, "kubeflow-system")}  # only the Trainer controller, on purpose
    assert not [k for k in api.objects if k[1] in ("nodeclaims", "nodes", "pods")]
    text = out.out
    assert "waiting for Karpenter to drain 2 node(s) of cpu-amx, gpu: cpu-amx-ax7k2, cpu-amx-bx7k2" in text
    assert "Karpenter has drained the nodes: no NodeClaim of cpu-amx, gpu left" in text
    # the claim is gone, the file system is not (Retain): named, with the call that ends its cost
    assert (
        f"PersistentVolume {PV}, FSx for Lustre {FSX_ID}, 1200 GiB" in text
        and f"kubectl delete pv {PV} && aws fsx delete-file-system --file-system-id {FSX_ID}" in text
    )
    assert text.rstrip().endswith("Done: 9 object(s) deleted, no NodeClaim of the deleted pools left.")
    # a later dry run still names the released volume (still billed) and finds nothing else
    capsys.readouterr()
    code, out = _run(api, capsys=capsys)
    assert code == 0 and "Nothing of the workbook's on this cluster" in out.out
    assert (
        f"PersistentVolume {PV} (was default/workshop-outputs): FSx for Lustre {FSX_ID}, 1200 GiB: "
        "price unknown (its deployment type is no longer on the cluster; as SCRATCH_2, the workbook's "
        "default: ~$168/month [fsx])" in out.out
    )  # the StorageClass that said SCRATCH_2 is gone: an estimate, not a figure
    assert (
        f"remove: kubectl delete pv {PV} && aws fsx delete-file-system --file-system-id {FSX_ID}" in out.out
    )


def test_nodes_still_draining_at_the_timeout_is_a_failure(api, capsys):
    _seed(api, api.cluster)
    api.on_delete.clear()  # Karpenter never finishes
    code, out = _run(api, "--yes", "--timeout", "0.3", capsys=capsys)
    assert code == 1
    assert "timed out after 0.3 s: 2 NodeClaim(s) left (cpu-amx-ax7k2, cpu-amx-bx7k2)" in out.out
    assert (
        "Not everything was removed (1 problem(s)): NodeClaims of cpu-amx, gpu still there after 0.3 s"
        in out.out
    )
    assert _deletes(api) == DELETE_ORDER  # everything else was still deleted


# ------------------------------------------------------------------------------------ the trained model
def test_a_claim_holding_a_model_stops_the_teardown(api, capsys):
    _seed(api, api.cluster)
    _complete(api)  # the job ended Complete with --save-model onto the claim (and was kept)
    code, out = _run(api, capsys=capsys)
    assert (
        code == 0
        and "holds a trained model: /fsx/cpu-llama3/final (TrainJob cpu-llama3 ended Complete" in out.out
    )
    assert "--yes will stop here unless --keep-model" in out.out
    assert (
        "`python -m workshop cluster teardown --yes --keep-model` deletes 7 of the object(s) above, "
        "`python -m workshop cluster teardown --yes --delete-model` all 9" in out.out
    )
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 3 and _deletes(api) == []
    assert (
        "Stopped, nothing deleted: PersistentVolumeClaim default/workshop-outputs: /fsx/cpu-llama3/final"
        in out.out
    )
    assert "--yes --keep-model" in out.out and "--yes --delete-model" in out.out


def test_the_annotation_run_on_cluster_writes_marks_the_model_after_the_job_is_gone(api, capsys):
    job = _seed(api, api.cluster)
    from workshop.k8s import jobs

    assert (
        jobs.mark_saved_model(api.cluster, job) == "/fsx/cpu-llama3/final"
    )  # what run_on_cluster does at Complete
    patch = [r for r in api.requests if r["method"] == "PATCH"][-1]
    assert patch["headers"]["content-type"] == "application/merge-patch+json"
    api.cluster.delete("TrainJob", "cpu-llama3", NS)  # ... and then deletes the finished job
    claim = api.objects[("v1", "persistentvolumeclaims", NS, "workshop-outputs")]
    assert claim["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "workshop"
    }  # the merge patch kept the rest
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 3
    assert "/fsx/cpu-llama3/final (annotation models.workshop.example.com/cpu-llama3)" in out.out


def test_keep_model_keeps_the_claim_and_prints_the_later_command(api, capsys):
    _seed(api, api.cluster)
    _complete(api)
    code, out = _run(api, "--yes", "--keep-model", capsys=capsys)
    assert code == 0, out
    kept = [p for p in DELETE_ORDER if "persistentvolumeclaims" not in p and "storageclasses" not in p]
    assert _deletes(api) == kept
    assert ("v1", "persistentvolumeclaims", NS, "workshop-outputs") in api.objects
    # the job that said so is gone: the claim now says it holds the model, so a later run still knows
    claim = api.objects[("v1", "persistentvolumeclaims", NS, "workshop-outputs")]
    assert claim["metadata"]["annotations"] == {
        "models.workshop.example.com/cpu-llama3": "/fsx/cpu-llama3/final"
    }
    text = out.out
    assert (
        "Kept for the trained model: PersistentVolumeClaim default/workshop-outputs, holding "
        "/fsx/cpu-llama3/final (TrainJob cpu-llama3 ended Complete with --save-model)" in text
    )
    for cmd in (
        "python -m workshop cluster teardown --yes --delete-model",
        f"kubectl delete pvc workshop-outputs -n {NS}",
        f"kubectl delete pv {PV}",
        f"aws fsx delete-file-system --file-system-id {FSX_ID}",
        "kubectl delete storageclass fsx-lustre",
    ):
        assert f"\n  {cmd}\n" in text + "\n", cmd
    capsys.readouterr()
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 3 and "(annotation models.workshop.example.com/cpu-llama3)" in out.out


def test_keep_model_never_deletes_the_only_record_of_the_model(api, capsys):
    _seed(api, api.cluster)
    _complete(api)
    api.faults.append(
        (
            "PATCH",
            f"/api/v1/namespaces/{NS}/persistentvolumeclaims/workshop-outputs",
            403,
            status(403, "forbidden", "Forbidden"),
            None,
        )
    )
    code, out = _run(api, "--yes", "--keep-model", capsys=capsys)
    assert code == 1
    assert (TRAINER, "trainjobs", NS, "cpu-llama3") in api.objects  # the Complete job stays: it is the record
    assert DELETE_ORDER[0] not in _deletes(api) and _deletes(api) == [
        p for p in DELETE_ORDER[1:] if "persistentvolumeclaims" not in p and "storageclasses" not in p
    ]
    assert "TrainJob(s) cpu-llama3 kept: they are the only record that the claim holds a model" in out.out


def test_delete_model_removes_the_claim_and_names_the_retained_file_system(api, capsys):
    _seed(api, api.cluster)
    _complete(api)
    code, out = _run(api, "--yes", "--delete-model", capsys=capsys)
    assert code == 0, out
    assert _deletes(api) == DELETE_ORDER
    assert (
        "Left behind by PersistentVolumeClaim default/workshop-outputs (reclaimPolicy Retain, still billed): "
        f"PersistentVolume {PV}, FSx for Lustre {FSX_ID}, 1200 GiB: $0.23/h (~$168/month) [fsx]. When you no "
        f"longer need it: kubectl delete pv {PV} && aws fsx delete-file-system --file-system-id {FSX_ID}"
        in out.out
    )
    assert (
        api.objects[("v1", "persistentvolumes", None, PV)]["status"]["phase"] == "Released"
    )  # not ours to delete


# ------------------------------------------------------------------------------ only the workbook's
def test_foreign_objects_survive_and_are_listed_as_left_alone(api, capsys):
    _seed(api, api.cluster)
    foreign = _seed_foreign(api)
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 0, out
    assert all(key in api.objects for key in foreign)
    assert not [p for p in _deletes(api) if p not in DELETE_ORDER]
    text = out.out
    assert "Left alone (same kinds, neither the label nor the field manager `workshop`):" in text
    for kind, ref, why in [
        ("TrainJob", "team-a/their-job", "fields managed by kubectl-client-side-apply"),
        ("PersistentVolumeClaim", "team-a/data", "no label, no field manager"),
        ("NodePool", "team-gpu", "fields managed by kubectl"),
        ("EC2NodeClass", "default", "no label, no field manager"),
        ("ClusterTrainingRuntime", "deepspeed-distributed", "fields managed by kubectl"),
    ]:
        assert any(line.split()[:2] == [kind, ref] and line.endswith(why) for line in text.splitlines()), (
            kind,
            text,
        )


def test_a_secret_created_by_hand_without_the_label_is_left_alone(api, capsys):
    _seed(api, api.cluster)
    api.objects.pop(("v1", "secrets", NS, "hf-token"))
    api.put(
        "v1",
        "secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {  # `kubectl create secret` alone
                "name": "hf-token",
                "namespace": NS,
                "managedFields": managed_fields("kubectl-create", "Update"),
            },
        },
        NS,
    )
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 0 and ("v1", "secrets", NS, "hf-token") in api.objects
    assert any(
        line.split()[:2] == ["Secret", "default/hf-token"] and line.endswith("kubectl-create")
        for line in out.out.splitlines()
    )


def test_a_403_on_one_object_is_reported_and_the_rest_continue(api, capsys):
    _seed(api, api.cluster)
    api.faults.append(
        (
            "DELETE",
            "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/gpu",
            403,
            status(
                403,
                'ec2nodeclasses.karpenter.k8s.aws "gpu" is forbidden: User "alice" cannot delete resource',
                "Forbidden",
            ),
            None,
        )
    )
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 1
    assert _deletes(api) == DELETE_ORDER  # the refused one was tried in its place, the rest went on
    assert ("karpenter.k8s.aws/v1", "ec2nodeclasses", None, "gpu") in api.objects
    assert ("v1", "secrets", NS, "hf-token") not in api.objects
    text = out.out
    assert (
        "could not delete EC2NodeClass gpu: the kubeconfig user 'alice' cannot delete ec2nodeclasses" in text
    )
    assert "Not everything was removed (1 problem(s)): EC2NodeClass gpu:" in text


def test_nothing_to_do_on_an_empty_cluster(api, capsys):
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 0 and _deletes(api) == []
    assert "Nothing of the workbook's on this cluster" in out.out and out.out.rstrip().endswith(
        "Done: 0 object(s) deleted."
    )


def test_a_cluster_without_karpenter_or_the_trainer_is_listed_as_far_as_it_goes(tmp_path, capsys):
    groups = {gv: r for gv, r in FakeAPIServer().groups.items() if not gv.startswith("karpenter")}
    with FakeAPIServer(groups) as server:
        cluster = cl.connect(kubeconfig=server.kubeconfig(tmp_path / "kc"), quiet=True)
        job = _job()
        cluster.apply([job.hf_secret.api_body()], namespace=NS, validate=False)
        code = teardown.teardown(cluster, yes=True)
    out = capsys.readouterr().out
    assert (
        code == 0
        and "Not looked at: Karpenter is not installed on this cluster: no nodepools.karpenter.sh" in out
    )
    assert [r["path"] for r in server.requests if r["method"] == "DELETE"] == [
        f"/api/v1/namespaces/{NS}/secrets/hf-token"
    ]


# ---------------------------------------------------------------------------------- no cluster, bad flags
def test_no_cluster_is_one_line_and_exit_2(capsys):
    assert cluster_command(["teardown"]) == 2  # tests/conftest.py: the kubeconfig points at a closed port
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("error: no cluster: the API server at https://127.0.0.1:1 did not answer")


def test_no_kubeconfig_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    assert cluster_command(["teardown", "--yes"]) == 2
    out = capsys.readouterr()
    assert (
        out.err == f"error: no cluster: no kubeconfig at {tmp_path / 'nope'} (and not running inside a pod)\n"
    )


@pytest.mark.parametrize(
    "flags, said",
    [
        (
            ["--keep-model", "--delete-model"],
            "argument --delete-model: not allowed with argument --keep-model",
        ),
        (["--timeout", "0"], "--timeout must be a number > 0, got 0.0"),
        (["--timeout", "soon"], "argument --timeout: invalid float value: 'soon'"),
        (["-n", "Team_A"], "--namespace 'Team_A' is not a DNS label"),
        (["--force"], "unrecognized arguments: --force"),
    ],
)
def test_bad_flags_are_one_error_line_and_exit_2_before_any_request(api, flags, said, capsys):
    try:
        code = cluster_command(["--kubeconfig", api.kubeconfig_path, "teardown", *flags])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and said in errors[0], err
    assert api.requests == []  # judged before any connection


# ------------------------------------------------------------------------------------------ chapter 05
def test_chapter_05_ends_with_the_clean_up_before_its_summary():
    import json

    from workshop.launch.notebooks import notebooks

    path = next(p for p in notebooks() if p.name.startswith("05"))
    cells = json.loads(path.read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    start = next(i for i, t in enumerate(text) if t.startswith("## 10 · When you are done"))
    summary = next(i for i, t in enumerate(text) if t.startswith("## Summary"))
    assert start + 2 == summary and cells[start + 1]["cell_type"] == "code"
    code = text[start + 1]
    assert "teardown.teardown(cluster)" in code and "offline_plan()" in code and "--yes" in code
    assert "yes=True" not in code  # the notebook only ever lists


def test_the_offline_plan_says_what_the_command_would_do():
    plan = teardown.offline_plan()
    assert " -> ".join(model.ORDER) in plan
    assert plan.splitlines()[-2:] == [
        "  python -m workshop cluster teardown",
        "  python -m workshop cluster teardown --yes",
    ]
    assert "--keep-model" in plan and "aws fsx delete-file-system" in plan


# ------------------------------------------------------------------- finalizers, orphans, co-owners, 403
CLAIM = ("v1", "persistentvolumeclaims", NS, "workshop-outputs")


def test_an_object_a_finalizer_holds_is_terminating_not_deleted(api, capsys):
    """The claim's pvc-protection (a pod, listed and named, still mounts it) keeps it on the server: never
    "deleted", exit 4, and the next teardown names it Terminating and does not delete it again."""
    _seed(api, api.cluster)
    assert api.objects[CLAIM]["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]  # admission
    _mounting_pod(api)  # not the job's: kube-controller-manager keeps the claim while it runs
    code, out = _run(api, "--yes", "--delete-model", "--timeout", "0.5", capsys=capsys)
    assert code == delete.EXIT_TERMINATING == 4, out.out
    assert CLAIM in api.objects and api.objects[CLAIM]["metadata"]["deletionTimestamp"]
    assert "deleted PersistentVolumeClaim default/workshop-outputs" not in out.out
    assert (
        "PersistentVolumeClaim default/workshop-outputs: deletion asked for, Terminating: finalizer "
        "kubernetes.io/pvc-protection (pod debug-shell still mounts the claim; kube-controller-manager's PVC "
        "protection controller removes it once no pod does)" in out.out
    )
    assert "Not done: 1 object(s) still Terminating" in out.out and "Done:" not in out.out
    api.requests.clear()
    code, out = _run(api, "--yes", "--delete-model", "--timeout", "0.3", capsys=capsys)
    assert code == 4 and _deletes(api) == []
    assert "Terminating since" in out.out and "is already Terminating" in out.out


def test_a_claim_no_pod_mounts_is_not_blamed_on_a_pod(api, capsys):
    """No pod mounts the claim and no controller removes pvc-protection (a cluster without a running
    controller-manager): teardown lists the pods and says none mounts it, naming what removes the finalizer,
    never "a pod still mounts the claim"."""
    _seed(api, api.cluster)
    api.pvc_protection_controller = False
    code, out = _run(api, "--yes", "--delete-model", "--timeout", "0.5", capsys=capsys)
    assert code == 4, out.out
    held = [line for line in out.out.splitlines() if line.startswith("PersistentVolumeClaim default/")]
    assert len(held) == 1 and "no pod mounts the claim, by the pods listed just now" in held[0], out.out
    assert "PVC protection controller" in held[0] and "still mounts" not in out.out, out.out


def _mounting_pod(api, name="debug-shell"):
    volumes = [{"name": "out", "persistentVolumeClaim": {"claimName": CLAIM[3]}}]
    pod = {
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"volumes": volumes},
        "status": {"phase": "Running"},
    }
    api.put("v1", "pods", pod, NS)


def test_a_finalizer_removed_while_teardown_waits_ends_done(api, capsys):
    _seed(api, api.cluster)
    _mounting_pod(api)

    def controller():  # the pod that mounted the claim ends 0.3 s after the claim is marked for deletion
        while CLAIM in api.objects and not api.objects[CLAIM]["metadata"].get("deletionTimestamp"):
            time.sleep(0.02)
        time.sleep(0.3)
        api.finalize("v1", "persistentvolumeclaims", "workshop-outputs", NS)

    thread = threading.Thread(target=controller, daemon=True)
    thread.start()
    code, out = _run(api, "--yes", "--delete-model", "--timeout", "10", capsys=capsys)
    thread.join(5)
    assert code == 0, out.out
    assert CLAIM not in api.objects
    assert "deleted PersistentVolumeClaim default/workshop-outputs (its finalizer was removed)" in out.out


def _orphan_claim(api, name="cpu-amx-zz9q1", pool="cpu-amx"):
    labels = {
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": "m7i.16xlarge",
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.k8s.aws/instance-cpu": "64",
    }
    meta = {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]}
    api.put("karpenter.sh/v1", "nodeclaims", {"kind": "NodeClaim", "metadata": meta, "status": {}})


def test_nodes_of_a_pool_already_deleted_are_found_and_counted(api, capsys):
    _orphan_claim(api)
    _orphan_claim(api, "someone-else-1", pool="their-pool")
    code, out = _run(api, capsys=capsys)
    assert code == 0
    assert "Nothing of the workbook's on this cluster" not in out.out
    assert "whose NodePool is gone" in out.out and "1 x m7i.16xlarge on-demand, $3.23/h" in out.out
    assert "nodes $3.23/h" in out.out and "someone-else-1" not in out.out
    code, out = _run(api, "--yes", "--timeout", "0.3", capsys=capsys)
    assert code == 1 and "timed out after 0.3 s: 1 NodeClaim(s) left (cpu-amx-zz9q1)" in out.out
    assert _deletes(api) == ["/apis/karpenter.sh/v1/nodeclaims/cpu-amx-zz9q1"]  # never someone else's
    assert "asked Karpenter to terminate NodeClaim cpu-amx-zz9q1 (its NodePool is gone)" in out.out


def test_a_runtime_an_admin_applied_too_is_co_owned_listed_not_deleted(api, capsys):
    api.put(
        TRAINER,
        "clustertrainingruntimes",
        {**RUNTIME, "metadata": {**RUNTIME["metadata"], "managedFields": managed_fields("kubectl", "Apply")}},
    )
    api.cluster.apply([RUNTIME], validate=False)  # the workbook re-applies it (chapter 05's install)
    code, out = _run(api, "--yes", capsys=capsys)
    assert code == 0 and _deletes(api) == []
    assert (TRAINER, "clustertrainingruntimes", None, "torch-distributed") in api.objects
    assert "Co-owned" in out.out and "also applied by kubectl" in out.out


def test_every_list_forbidden_is_not_nothing_on_the_cluster(api, capsys):
    _seed(api, api.cluster)
    for plural in ("trainjobs", "persistentvolumeclaims", "storageclasses", "nodepools", "ec2nodeclasses"):
        api.forbidden.add(("list", plural))
    api.forbidden |= {("list", "clustertrainingruntimes"), ("list", "secrets")}
    code, out = _run(api, capsys=capsys)
    assert code == 1
    assert "Nothing of the workbook's" not in out.out
    assert "Could not tell what of the workbook's is on this cluster: listing TrainJob," in out.out
    assert "cannot list trainjobs" in out.out


def test_a_missing_namespace_is_named(api, capsys):
    code, out = _run(api, "-n", "nosuchns", capsys=capsys)
    assert code == 1
    assert "namespace 'nosuchns' does not exist" in out.out.lower()
    assert "Nothing of the workbook's" not in out.out


def test_controllers_writing_status_or_bindings_do_not_make_an_object_co_owned():
    def obj(*entries):
        return {"metadata": {"managedFields": [dict(e) for e in entries]}}

    mine = {"manager": "workshop", "operation": "Apply"}
    assert model.co_owners(obj(mine, {"manager": "karpenter", "operation": "Update"})) == []
    assert model.co_owners(obj(mine, {"manager": "kube-controller-manager", "operation": "Update"})) == []
    assert model.co_owners(obj(mine, {"manager": "x", "operation": "Update", "subresource": "status"})) == []
    shared = obj(mine, {"manager": "kubectl-client-side-apply", "operation": "Update"})
    assert model.co_owners(shared) == ["kubectl-client-side-apply"]
    assert model.co_owners(obj(mine, {"manager": "before-first-apply", "operation": "Update"})) == [
        "before-first-apply"
    ]


def test_every_kind_teardown_deletes_has_a_describer_that_prices_it():
    """A kind added to KINDS without a describer would fail the inventory (KeyError) on a live cluster."""
    from workshop.k8s.teardown.describe import DESCRIBERS, Seen

    assert set(DESCRIBERS) == set(model.ORDER)
    for kind in ("StorageClass", "EC2NodeClass", "ClusterTrainingRuntime", "Secret"):
        item = model.Found(kind, "x", None, "v1", "label")
        DESCRIBERS[kind](item, {}, Seen(None, [], {}, {}, {}))  # no reads needed for these kinds
        assert item.cost.startswith("nothing"), (kind, item.cost)
