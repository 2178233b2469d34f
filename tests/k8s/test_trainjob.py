"""TrainJob specs (both Trainer forms, validated against the real CRDs), the HF Secret, images, cluster
ops."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from workshop.errors import WorkshopError
from workshop.k8s import jobs
from workshop.k8s import trainjob as tj
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import to_yaml
from workshop.paths import REPO

TOKEN = "hf_SuperSecretValue_0123456789"


class FakeRec:
    """A planner recommendation with known numbers (the real planner is tested in test_memory)."""

    cpu_request, memory_request, shm_size, threads_per_rank = "30", "120Gi", "8Gi", 16


def cpu_job(**kw):
    kw.setdefault("recommendation", FakeRec())
    kw.setdefault("hf_secret", tj.HFTokenSecret())
    return tj.cpu_trainjob(**kw)


def gpu_job(**kw):
    return tj.gpu_trainjob(gpus_per_node=8, efa_per_node=4, hf_secret=tj.HFTokenSecret(), **kw)


# ------------------------------------------------------------------ both forms, own CRDs
@pytest.mark.parametrize("make", [cpu_job, gpu_job], ids=["cpu", "gpu"])
def test_each_form_validates_against_its_own_release_and_fails_against_the_other(make):
    spec = make()
    for version, own, other in (
        ("2.1.0", "2.1.0", "2.3.0"),
        ("2.2.0", "2.3.0", "2.1.0"),
        ("2.3.0", "2.3.0", "2.1.0"),
    ):
        if make is gpu_job and version == "2.1.0":
            spec = make(ipc_lock=False)  # v2.1 cannot add capabilities (tested below)
        docs = spec.documents(version)
        assert tj.validate(docs, own) == [], version
        problems = tj.validate(docs, other)
        field = "podTemplateOverrides" if version == "2.1.0" else "runtimePatches"
        assert any(p.path == f"spec.{field}" and p.rule == "unknown field" for p in problems), problems


def test_forms_put_the_same_pod_settings_in_different_places():
    spec = cpu_job(nodes=3, procs_per_node=2)
    old, new = spec.to_dict("2.1.0")["spec"], spec.to_dict("2.2.0")["spec"]
    assert old["trainer"] == new["trainer"]
    assert "runtimePatches" not in old and "podTemplateOverrides" not in new
    pod_old = old["podTemplateOverrides"][0]
    assert pod_old["targetJobs"] == [{"name": "node"}]
    patch = new["runtimePatches"][0]
    assert patch["manager"] == tj.PATCH_MANAGER
    rj = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert rj["name"] == "node"
    assert rj["template"]["spec"]["template"]["spec"] == pod_old["spec"]
    # rev-en 5: every node pod tells Karpenter not to disrupt its node (drift, consolidation), in both forms
    assert rj["template"]["spec"]["template"]["metadata"] == pod_old["metadata"]
    assert pod_old["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    diff = tj.migration_diff(spec)
    assert "-  podTemplateOverrides:" in diff and "+  runtimePatches:" in diff


def test_cpu_job_contents():
    spec = cpu_job(nodes=4, procs_per_node=2, node_pool="cpu-amx")
    d = spec.to_dict("2.1.0")
    trainer = d["spec"]["trainer"]
    assert trainer["numNodes"] == 4 and trainer["numProcPerNode"] == 2  # an int, never "auto"
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "30", "memory": "120Gi"},
        "limits": {"memory": "120Gi"},
    }
    assert trainer["command"] == ["torchrun", "-m", "workshop.train"]
    args = trainer["args"]
    assert args[args.index("--threads") + 1] == "16" and args[args.index("--backend") + 1] == "gloo"
    assert "cpu" in trainer["image"] and "gpu" not in trainer["image"]
    assert d["spec"]["runtimeRef"]["name"] == "torch-distributed"
    pod = d["spec"]["podTemplateOverrides"][0]["spec"]
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "cpu-amx"}
    assert pod["tolerations"] == [
        {"key": "intel.com/amx", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]
    assert pod["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    ]
    env = {e["name"]: e for e in trainer["env"]}
    assert env["OMP_NUM_THREADS"]["value"] == "16"
    assert not set(env) & set(tj.RESERVED_ENV)


def test_cpu_job_sizes_come_from_the_planner():
    from workshop.plan.fit import recommend

    rec = recommend("llama-3-8b", nodes=2, procs_per_node=1, source="moto")
    d = tj.cpu_trainjob(nodes=2, recommendation=rec).to_dict("2.1.0")
    res = d["spec"]["trainer"]["resourcesPerNode"]["requests"]
    assert res == {"cpu": rec.cpu_request, "memory": rec.memory_request}
    vol = d["spec"]["podTemplateOverrides"][0]["spec"]["volumes"][0]
    assert vol["emptyDir"]["sizeLimit"] == rec.shm_size


def test_gpu_job_requests_gpus_and_efa_and_ipc_lock_only_where_expressible():
    d = gpu_job(instance_type="p4d.24xlarge").to_dict("2.3.0")
    trainer = d["spec"]["trainer"]
    assert trainer["numProcPerNode"] == 8
    assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}
    assert trainer["args"][trainer["args"].index("--backend") + 1] == "nccl"
    pod = d["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"
    ]["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert {t["key"] for t in pod["tolerations"]} == {"nvidia.com/gpu", "vpc.amazonaws.com/efa"}
    with pytest.raises(WorkshopError, match="capabilities"):
        gpu_job().to_dict("2.1.0")


def test_gpu_counts_from_the_catalog():
    spec = tj.gpu_trainjob(instance_type="g6e.8xlarge", catalog_source="moto")
    assert spec.procs_per_node == 1 and spec.limits["vpc.amazonaws.com/efa"] == "1"
    with pytest.raises(WorkshopError, match="no GPU"):
        tj.gpu_trainjob(instance_type="c7i.48xlarge", catalog_source="moto")


# ------------------------------------------------------------------ bad input, before anything is sent
@pytest.mark.parametrize(
    "kw, match",
    [
        ({"nodes": 0}, "nodes must be an integer >= 1"),
        ({"nodes": -2}, "nodes must be an integer >= 1"),
        ({"name": "Cpu_Llama3"}, "not a DNS label"),
        ({"name": "3-llama"}, "not a DNS label"),
        ({"name": "a" * 64}, "not a DNS label"),
        ({"node_pool": "CPU AMX"}, "not a DNS label"),
    ],
)
def test_bad_cpu_job_input(kw, match):
    with pytest.raises(WorkshopError, match=match):
        cpu_job(**kw)


def test_procs_per_node_auto_is_refused():
    with pytest.raises(WorkshopError, match="never 'auto'"):
        tj.TrainJobSpec(name="x", image="i:1", train_args=[], nodes=1, procs_per_node="auto")


@pytest.mark.parametrize("version", ["2.0.0", "3.1", "latest", "v2.4.0"])
def test_unknown_trainer_version(version):
    with pytest.raises(WorkshopError, match="unknown Kubeflow Trainer version"):
        cpu_job().to_dict(version)


def test_version_spellings():
    assert tj.normalize_trainer_version("v2.2") == "2.2.0"
    assert tj.trainer_form("v2.1.0") == "podTemplateOverrides" and tj.trainer_form("2.3") == "runtimePatches"
    assert tj.crd_release("2.2.0") == "2.3.0" and tj.crd_release("2.1.0") == "2.1.0"


def test_reserved_env_and_cross_namespace_secret_refused():
    with pytest.raises(WorkshopError, match="PET_MASTER_ADDR"):
        tj.TrainJobSpec(
            name="x", image="i:1", train_args=[], nodes=1, procs_per_node=1, env={"PET_MASTER_ADDR": "a"}
        )
    with pytest.raises(WorkshopError, match="namespace"):
        cpu_job(hf_secret=tj.HFTokenSecret(namespace="other"))


# ------------------------------------------------------------------ the token never leaks
def test_token_never_in_manifest_repr_or_output(monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    secret = tj.secret_from_env()
    assert secret.value == TOKEN
    spec = cpu_job(hf_secret=secret)
    text = "".join(to_yaml(spec.documents(v)) for v in ("2.1.0", "2.2.0"))
    assert TOKEN not in text and TOKEN not in repr(spec) and TOKEN not in repr(secret)
    assert TOKEN not in secret.kubectl_command()
    env = {e["name"]: e for e in spec.to_dict()["spec"]["trainer"]["env"]}
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
    }
    assert "value" not in env["HF_TOKEN"]
    rendered = (REPO / "manifests").glob("trainjob-*.yaml")
    for path in rendered:
        assert "secretKeyRef" in path.read_text()
    assert TOKEN not in capsys.readouterr().out


def test_secret_from_env_missing(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert tj.secret_from_env().value is None
    with pytest.raises(WorkshopError, match=r"\$HF_TOKEN is not set"):
        tj.secret_from_env(required=True)


# ------------------------------------------------------------------ images vs manifests
def _dockerfile(kind: str) -> tuple[dict, str]:
    text = (REPO / "docker" / kind / "Dockerfile").read_text()
    labels = dict(re.findall(r'org\.opencontainers\.image\.(\w+)="([^"]*)"', text))
    return labels, text


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_manifest_images_and_commands_match_the_build_files(kind):
    labels, text = _dockerfile(kind)
    assert labels["title"] == tj.IMAGES[kind] and labels["version"] == tj.IMAGE_TAG
    readme = (REPO / "docker" / "README.md").read_text()
    assert (
        f"docker build -f docker/{kind}/Dockerfile -t $REGISTRY/{labels['title']}:{labels['version']} ."
        in readme
    )
    manifest = yaml.safe_load_all((REPO / "manifests" / f"trainjob-{kind}-v2.2.yaml").read_text())
    job = next(d for d in manifest if d and d["kind"] == "TrainJob")["spec"]["trainer"]
    assert job["image"] == f"{tj.DEFAULT_REGISTRY}/{labels['title']}:{labels['version']}"
    # the command: torchrun comes from the torch wheel, -m workshop.train from the installed package
    assert job["command"] == ["torchrun", "-m", "workshop.train"]
    assert re.search(r"pip install --index-url \$\{TORCH_INDEX\} torch==\$\{TORCH_VERSION\}", text)
    # the package from a bind mount of the context (no source copy, build/ or egg-info left), checked from /
    assert "--mount=type=bind,source=.,target=/tmp/workshop-src,rw" in text
    assert "pip install --no-deps --no-build-isolation /tmp/workshop-src" in text
    assert 'WORKDIR /\nRUN python -c "import torch, deepspeed, transformers, workshop.train' in text
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "git clone" not in code
    if kind == "cpu":
        assert "cuda" not in code.lower() and "/whl/cpu" in code
    else:
        assert "nvidia/cuda" in text and "efa_installer.sh" in text and "/whl/cu" in text
    # every training flag in the manifest is one the entry point accepts
    from workshop.cli.train import build_parser

    flags = {s for a in build_parser()._actions for s in a.option_strings}
    assert {a for a in job["args"] if a.startswith("--")} <= flags


def test_image_pins_are_exact_and_satisfy_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pins = {}
    for line in (REPO / "docker" / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            spec = list(req.specifier)
            assert len(spec) == 1 and spec[0].operator == "==", line  # pinned, not ranges
            pins[req.name.lower()] = Version(spec[0].version)
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_pin = Version(re.search(r"ARG TORCH_VERSION=(\S+)", _dockerfile("cpu")[1]).group(1))
    for dep in map(Requirement, deps):
        name = dep.name.lower()
        if name == "torch":
            assert torch_pin in dep.specifier
        elif name in pins:
            assert pins[name] in dep.specifier, (name, pins[name], dep.specifier)
    for needed in ("deepspeed", "transformers", "accelerate", "datasets", "tokenizers", "safetensors"):
        assert needed in pins


def _training_imports() -> set[str]:
    """Top-level third-party modules the training entry point can import, lazy imports included: the
    closure over workshop modules reachable from workshop/train/__main__.py."""
    import ast
    import sys

    seen, third, todo = set(), set(), ["workshop.train.__main__"]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        base = REPO / mod.replace(".", "/")
        path = base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")
        if not path.is_file():
            continue  # a name imported from a module, not a module
        parts = mod.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                head = package[: len(package) - node.level + 1] if node.level else []
                mod_name = ".".join(head + ([node.module] if node.module else []))
                names = [mod_name] + [f"{mod_name}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "workshop":
                    todo.append(name)
                elif name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "__future__":
                    third.add(name.split(".")[0])
    return third


def test_image_holds_everything_training_imports():
    """A pod runs `torchrun -m workshop.train` in an image installed with --no-deps: a module the entry point
    imports (even lazily: TensorBoard, PEFT, boto3 for --sync-to) and the image lacks fails there, not
    here."""
    import importlib.metadata as md

    pins = {
        Requirement(line).name.lower().replace("_", "-")
        for line in (REPO / "docker" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    dists = md.packages_distributions()
    imports = _training_imports()
    assert {"transformers", "deepspeed", "peft", "tensorboard"} <= imports  # the walk reaches lazy imports
    missing = sorted(
        (module, dist)
        for module in imports - {"torch"}
        for dist in dists.get(module, [module])
        if dist.lower().replace("_", "-") not in pins
    )
    assert not missing, f"training imports these, docker/requirements.txt lacks them: {missing}"


# ------------------------------------------------------------------ cluster operations (fake cluster)
class FakeCluster:
    """Duck-typed Cluster: records calls, serves TrainJob status and a rank-0 log."""

    def __init__(self, secrets=(), conditions=(("Complete", "True"),)):
        self.secrets = set(secrets)
        self.applied, self.deleted, self.calls, self.patched = [], [], [], []
        self.conditions = [{"type": t, "status": s} for t, s in conditions]
        self.jobs = set()

    def get(self, kind, name=None, namespace=None, *, label_selector=None):
        self.calls.append(("get", kind, name, label_selector))
        if kind == "Secret":
            if name in self.secrets:
                return {"metadata": {"name": name}}
            raise ClusterError(404, "secret not found")
        if kind == "TrainJob":
            if name not in self.jobs:
                raise ClusterError(404, "not found")
            return {"status": {"conditions": self.conditions}}
        if kind == "Pod":
            return {"items": [{"metadata": {"name": "cpu-llama3-node-0-0-abcde"}}]}
        raise AssertionError(kind)

    def apply(
        self,
        docs,
        dry_run=False,
        field_manager="workshop",
        *,
        namespace="default",
        force=True,
        validate=True,
        karpenter="1.8.8",
        trainer="2.1.0",
    ):
        self.validated_against = trainer if validate else None
        for d in docs:
            self.applied.append(d)
            if d["kind"] == "Secret":
                self.secrets.add(d["metadata"]["name"])
            if d["kind"] == "TrainJob":
                self.jobs.add(d["metadata"]["name"])
        return []

    def patch(self, kind, name, namespace, patch, *, field_manager="workshop", api_version=None):
        self.patched.append((kind, name, namespace, patch))
        return {}

    def delete(self, kind, name, namespace=None, **kw):
        self.deleted.append((kind, name))
        present = name in self.jobs
        self.jobs.discard(name)
        return present

    def logs(self, pod, namespace="default", *, container=None, follow=False, tail=None, timeout=3600):
        assert pod.startswith("cpu-llama3-node-0-0") and container == "node"
        return iter(
            [
                'METRIC {"step": 1, "loss": 9.0, "step_time_s": 1.0}',
                'METRIC {"step": 2, "loss": 8.5, "step_time_s": 0.9}',
                "done",
            ]
        )


def test_missing_secret_fails_before_anything_is_submitted(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    fake = FakeCluster()
    with pytest.raises(WorkshopError, match="hf-token does not exist") as err:
        jobs.submit(fake, cpu_job(hf_secret=tj.secret_from_env()))
    assert "kubectl create secret generic hf-token" in str(err.value)
    assert fake.applied == [] and fake.deleted == []


def test_secret_created_from_env_then_job_submitted(monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    fake = FakeCluster()
    sub = jobs.submit(fake, cpu_job(hf_secret=tj.secret_from_env()), trainer="2.2.0")
    assert sub.secret == "created"
    kinds = [d["kind"] for d in fake.applied]
    assert kinds == ["Secret", "TrainJob"]
    assert fake.applied[0]["stringData"] == {"token": TOKEN}  # only in the API request body
    assert "runtimePatches" in fake.applied[1]["spec"]
    assert fake.validated_against == "2.3.0"  # the v2.2+ form is checked against a v2.2+ CRD, not v2.1
    assert TOKEN not in str(fake.applied[1]) and TOKEN not in capsys.readouterr().out


def test_invalid_manifest_is_refused_before_any_call():
    fake = FakeCluster(secrets={"hf-token"})
    spec = cpu_job()
    spec.tolerations = [{"key": "intel.com/amx", "tolerationSeconds": "ten"}]  # must be an integer
    with pytest.raises(WorkshopError, match="problem"):
        jobs.submit(fake, spec)
    assert fake.calls == [] and fake.applied == []


def test_run_on_cluster_streams_parses_waits_deletes(capsys):
    fake = FakeCluster(secrets={"hf-token"})
    out = jobs.run_on_cluster(cpu_job(), cluster=fake, timeout=60)
    assert out["outcome"] == "Complete" and out["submitted"].secret == "present"
    assert [s["loss"] for s in out["steps"]] == [9.0, 8.5]
    assert ("TrainJob", "cpu-llama3") in fake.deleted
    assert ("get", "Pod", None, jobs.rank0_selector("cpu-llama3")) in fake.calls
    assert "METRIC" in capsys.readouterr().out


def test_wait_times_out_without_hanging():
    fake = FakeCluster(conditions=(("Created", "True"),))
    fake.jobs.add("j")
    now = [0.0]
    got = jobs.wait(
        fake,
        "j",
        timeout=30,
        interval=10,
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert got is None and now[0] <= 30
    with pytest.raises(WorkshopError, match="unknown TrainJob condition"):
        jobs.wait(fake, "j", until=("Done",))


def test_no_cluster_is_a_plain_none(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert jobs.run_on_cluster(cpu_job()) is None
    assert "no cluster" in capsys.readouterr().out


def test_kubectl_command_is_valid_shell():
    cmd = tj.HFTokenSecret().kubectl_command()
    assert shlex.split(cmd)[0] == "printf" and "--from-file=token=/dev/stdin" in cmd
    assert cmd.endswith("&& kubectl label secret hf-token -n default app.kubernetes.io/part-of=workshop")


@pytest.mark.parametrize("trainer", ["2.1.0", "2.2.0"])
def test_multi_node_jobs_keep_one_node_pod_per_machine(trainer):
    """4 pods x 1 GPU must not be packed onto one 8-GPU machine: required pod anti-affinity on hostname."""
    spec = tj.gpu_trainjob(
        "gpu-4x1",
        nodes=4,
        gpus_per_node=1,
        efa_per_node=1,
        catalog_source="moto",
        ipc_lock=False,
        env={"NCCL_DEBUG": "INFO"},
        offload_param=True,
    )
    doc = spec.to_dict(trainer)
    pod = (
        doc["spec"]["podTemplateOverrides"][0]["spec"]
        if trainer == "2.1.0"
        else doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
            "template"
        ]["spec"]["template"]["spec"]
    )
    term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"jobset.sigs.k8s.io/jobset-name": "gpu-4x1"}
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in doc["spec"]["trainer"]["env"]
    assert "--offload-param" in doc["spec"]["trainer"]["args"]
    assert tj.validate(spec, trainer) == []
    single = tj.gpu_trainjob("gpu-1x4", nodes=1, gpus_per_node=4, efa_per_node=4, catalog_source="moto")
    assert "affinity" not in str(single.to_dict("2.2.0"))  # one pod: nothing to spread


def test_cpu_image_preloads_the_allocator_it_installs():
    """tcmalloc pays on the training step (`workshop bench ceiling`); a library on the host never reaches the
    pod, so the image installs it and preloads exactly the file that Debian package ships."""
    _, text = _dockerfile("cpu")
    packages = re.search(r"apt-get install -y --no-install-recommends ([^\\\n]+)", text).group(1).split()
    assert "libtcmalloc-minimal4" in packages
    preload = re.search(r"^ENV LD_PRELOAD=(\S+)$", text, re.MULTILINE).group(1)
    assert preload == "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def test_cpu_trainjob_renders_given_sizes_and_never_plans():
    """The Kubernetes layer renders what it is given: no recommendation and no pod sizes is one error
    naming the planned route, not a plan made here (k8s -> plan -> k8s)."""
    with pytest.raises(tj.WorkshopError, match="planned_job.plan_trainjob"):
        tj.cpu_trainjob(model="llama-3-8b", nodes=2)
    with pytest.raises(tj.WorkshopError, match=r"unknown training argument\(s\) \['plan'\]"):
        tj.cpu_trainjob(model="llama-3-8b", plan=object(), recommendation=FakeRec())  # no `plan=` route


def test_a_recommendation_for_another_cluster_is_refused():
    from workshop.plan.fit import recommend

    rec = recommend("llama-3-8b", nodes=4, procs_per_node=1, source="moto")
    with pytest.raises(tj.WorkshopError, match="nodes=4"):
        tj.cpu_trainjob(model="llama-3-8b", nodes=2, recommendation=rec)
    assert tj.cpu_trainjob(model="llama-3-8b", recommendation=rec).nodes == 4  # the recommendation's count
