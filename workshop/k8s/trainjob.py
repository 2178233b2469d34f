"""Kubeflow Trainer TrainJobs for the CPU (Xeon AMX) and GPU (EFA) runs, in both API forms, plus the HF
Secret.

Why a typed spec: the original workshop's TrainJob was a YAML template filled by `envsubst`, which (1) used
`podTemplateOverrides`, removed in Trainer v2.2 (replaced by `runtimePatches`), (2) wrote the Hugging Face
token into the manifest, (3) ran the CPU job on a CUDA image and (4) cloned a branch and pip-installed
unpinned packages at pod start. Here one `TrainJobSpec` renders either form from the same fields, every
number comes from the planner (chapter 01) or an explicit argument, the token is a `secretKeyRef`, and the
image is one built from `docker/` with everything pinned, so a pod starts training at once.

How torchrun learns its place: the `torch-distributed` ClusterTrainingRuntime's Torch plugin sets
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job completion index), PET_MASTER_ADDR
(`<job>-node-0-0.<job>`) and PET_MASTER_PORT on the `node` container; torchrun reads PET_* as defaults for
its flags, so the command is just `torchrun -m workshop.train ...`. Those names are reserved: the Trainer's
webhook rejects them in `spec.trainer.env`. `numProcPerNode` is always an integer here: with `auto` on a CPU
node the Torch plugin starts one process per vCPU of the request (190 ranks on a c7i.48xlarge).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from workshop import __version__
from workshop.errors import WorkshopError, check_choice, check_count
from workshop.k8s.base import PART_OF, check_dns_label, diff_yaml
from workshop.k8s.job_sizing import check_nodes, gpu_counts, gpu_resources, sized
from workshop.k8s.karpenter import AMX_TAINT
from workshop.k8s.storage import OutputStorage
from workshop.k8s.validate import available_versions, validate_documents
from workshop.lang import _
from workshop.plan.models import recipe
from workshop.train import TrainArgs

API_VERSION = "trainer.kubeflow.org/v1alpha1"
# Releases this module can render for: v2.1.x takes podTemplateOverrides, v2.2.0+ takes runtimePatches.
TRAINER_VERSIONS = ("2.1.0", "2.2.0", "2.3.0")
PATCH_MANAGER = "workshop.example.com/notebook"  # runtimePatches are keyed by manager (who owns the patch)
DEFAULT_RUNTIME = "torch-distributed"
NODE_JOB = "node"  # the replicated job (and container) of torch-distributed that runs torchrun
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?$")

# Images: name + tag here, built from docker/<accelerator>/Dockerfile (its LABELs carry the same values;
# tests/k8s/test_trainjob.py checks they agree). The registry is yours: push there, then render with it.
DEFAULT_REGISTRY = "registry.example.com/workshop"
IMAGES = {"cpu": "workshop-cpu", "gpu": "workshop-gpu"}
IMAGE_TAG = __version__
OUTPUT_DIR = "/workspace/out"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def image_ref(accelerator: str, registry: str = DEFAULT_REGISTRY, tag: str = IMAGE_TAG) -> str:
    """The image reference (str) `registry/workshop-cpu|gpu:tag` of the image built from docker/."""
    check_choice("accelerator", accelerator, IMAGES)
    return f"{registry.rstrip('/')}/{IMAGES[accelerator]}:{tag}"


def normalize_trainer_version(version: str) -> str:
    """'v2.2.0' or '2.2' -> '2.2.0'; anything else is an error naming the releases we know."""
    text = str(version).strip().lstrip("v")
    if re.fullmatch(r"\d+\.\d+", text):
        text += ".0"
    check_choice("Kubeflow Trainer version", text, TRAINER_VERSIONS)
    return text


def trainer_form(version: str) -> str:
    """Which field (str) carries pod customisations for a release: 'podTemplateOverrides' or
    'runtimePatches'."""
    v = tuple(int(x) for x in normalize_trainer_version(version).split("."))
    return "podTemplateOverrides" if v < (2, 2, 0) else "runtimePatches"


def crd_release(version: str) -> str:
    """The CRD folder to validate against: the same release if we have it, else the nearest one of the same
    form (2.2.0 -> 2.3.0: both take runtimePatches; the TrainJob schema did not change in between for it)."""

    version = normalize_trainer_version(version)
    have = available_versions("trainer")
    if version in have:
        return version
    same = [v for v in have if v in TRAINER_VERSIONS and trainer_form(v) == trainer_form(version)]
    if not same:
        raise WorkshopError(f"no Trainer CRDs for a release like {version}; have: {', '.join(have)}")
    return same[-1]


def _check_quantity(what: str, value: str) -> None:
    if not isinstance(value, str) or not _QUANTITY.match(value):
        raise WorkshopError(f"{what} {value!r} is not a Kubernetes quantity such as 4, 500m, 64Gi")


# ------------------------------------------------------------------------------------- the Secret
@dataclass
class HFTokenSecret:
    """A Kubernetes Secret holding the Hugging Face token. The value never goes into YAML or a repr:
    manifests only reference it (`valueFrom.secretKeyRef`); `api_body()` is for the API call alone."""

    name: str = "hf-token"
    key: str = "token"
    namespace: str = "default"
    value: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_dns_label("Secret name", self.name)
        check_dns_label("namespace", self.namespace)
        if not re.fullmatch(r"[-._a-zA-Z0-9]+", self.key):
            raise WorkshopError(f"Secret key {self.key!r} must consist of alphanumerics, '-', '_' or '.'")

    def __repr__(self) -> str:
        shown = "<set>" if self.value else "None"
        return (
            f"HFTokenSecret(name={self.name!r}, key={self.key!r}, namespace={self.namespace!r}, "
            f"value={shown})"
        )

    def env_var(self, var: str = "HF_TOKEN") -> dict:
        return {"name": var, "valueFrom": {"secretKeyRef": {"name": self.name, "key": self.key}}}

    def api_body(self) -> dict:
        """The object sent to the API server (stringData: the server base64-encodes it). Never render this."""
        if not self.value:
            raise WorkshopError(
                f"Secret {self.name}: no token value (set HF_TOKEN, or create it with kubectl)"
            )
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/part-of": "workshop"},
            },
            "stringData": {self.key: self.value},
        }

    def kubectl_command(self, env_var: str = "HF_TOKEN") -> str:
        """The shell command (str) that creates the Secret from the environment without the token touching
        argv, history or a file, then labels it as the workbook's (so `python -m workshop cluster teardown`
        finds and removes it)."""
        return (
            f'printf %s "${env_var}" | kubectl create secret generic {self.name} -n {self.namespace} '
            f"--from-file={self.key}=/dev/stdin && kubectl label secret {self.name} -n {self.namespace} "
            f"{PART_OF[0]}={PART_OF[1]}"
        )


def secret_from_env(
    name: str = "hf-token",
    *,
    namespace: str = "default",
    env_var: str = "HF_TOKEN",
    key: str = "token",
    required: bool = False,
) -> HFTokenSecret:
    """The HFTokenSecret with its value read from `$env_var` (never printed). Missing: None value, or an
    error if `required` (the error names the variable, not a value)."""
    value = os.environ.get(env_var) or None
    if required and value is None:
        raise WorkshopError(f"${env_var} is not set; export it (the token is read from the environment only)")
    return HFTokenSecret(name=name, key=key, namespace=namespace, value=value)


# ------------------------------------------------------------------------------------- the TrainJob
@dataclass
class TrainJobSpec:
    """Everything a TrainJob needs, independent of the Trainer release; `to_dict(trainer=...)` picks the
    form."""

    name: str
    image: str
    train_args: list[str]
    nodes: int
    procs_per_node: int
    namespace: str = "default"
    runtime: str = DEFAULT_RUNTIME
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    hf_secret: HFTokenSecret | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)
    shm_size: str | None = None
    capabilities: list[str] = field(default_factory=list)  # e.g. IPC_LOCK for EFA (v2.2+ only: see render)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)  # what the job is: global batch, steps, cost
    # on every node pod: Karpenter never voluntarily disrupts (drift, consolidation) a node running one
    pod_annotations: dict[str, str] = field(default_factory=lambda: {DO_NOT_DISRUPT: "true"})
    one_pod_per_node: bool = False  # pod anti-affinity: each node pod on its own machine
    launcher: list[str] = field(default_factory=lambda: ["torchrun"])
    module: str = "workshop.train"
    storage: OutputStorage | None = None  # where checkpoints and the final model are kept (mounted / synced)

    def __post_init__(self) -> None:
        check_dns_label("TrainJob name", self.name)
        check_dns_label("namespace", self.namespace)
        check_dns_label("runtime name", self.runtime)
        for what in ("nodes", "procs_per_node"):
            value = getattr(self, what)
            try:
                check_count(what, value)
            except WorkshopError as e:
                auto = what == "procs_per_node" and isinstance(value, str)
                raise WorkshopError(
                    f"{e} (never 'auto' on CPU: it means one rank per vCPU)" if auto else str(e)
                ) from None
        for k, v in {**self.requests, **self.limits}.items():
            _check_quantity(f"resource {k}", v)
        if self.shm_size is not None:
            _check_quantity("shm_size", self.shm_size)
        clash = sorted(set(self.env) & set(RESERVED_ENV))
        if clash:
            raise WorkshopError(f"env {clash} is set by the Trainer's Torch plugin for torchrun; remove it")
        if self.hf_secret and self.hf_secret.namespace != self.namespace:
            raise WorkshopError(
                f"Secret {self.hf_secret.name} is in namespace {self.hf_secret.namespace}, "
                f"the TrainJob in {self.namespace}: a secretKeyRef only sees its own namespace"
            )
        if not self.image or any(c.isspace() for c in self.image):
            raise WorkshopError(f"image {self.image!r} is not an image reference")
        if (
            self.storage is not None
            and self.storage.claim is not None
            and self.storage.claim.namespace != self.namespace
        ):
            raise WorkshopError(
                f"claim {self.storage.claim.name} is in namespace {self.storage.claim.namespace}, the "
                f"TrainJob in {self.namespace}: a pod only mounts claims of its own namespace"
            )

    # -- pieces
    @property
    def command(self) -> list[str]:
        return [*self.launcher, "-m", self.module]

    def env_list(self) -> list[dict]:
        out = [{"name": k, "value": str(v)} for k, v in sorted(self.env.items())]
        if self.hf_secret is not None:
            out.append(self.hf_secret.env_var())
        return out

    def _trainer(self) -> dict:
        resources = {k: v for k, v in (("requests", self.requests), ("limits", self.limits)) if v}
        return {
            "image": self.image,
            "command": self.command,
            "args": list(self.train_args),
            "numNodes": self.nodes,
            "numProcPerNode": self.procs_per_node,
            "resourcesPerNode": resources or None,
            "env": self.env_list() or None,
        }

    def _pod_spec(self, form: str) -> dict:
        container: dict = {"name": NODE_JOB}
        volumes, mounts = [], []
        if self.shm_size:
            # torch's DataLoader workers, gloo/NCCL shared-memory transports and DeepSpeed use /dev/shm; a
            # container's default is 64 MiB. A memory-backed emptyDir counts against the pod's memory.
            volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}})
            mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
        if self.storage is not None:
            volumes += self.storage.volumes()
            mounts += self.storage.volume_mounts()
        if mounts:
            container["volumeMounts"] = mounts
        if self.capabilities and form == "runtimePatches":
            container["securityContext"] = {"capabilities": {"add": list(self.capabilities)}}
        return {
            "nodeSelector": self.node_selector or None,
            "tolerations": self.tolerations or None,
            "affinity": self._spread() if self.one_pod_per_node and self.nodes > 1 else None,
            "serviceAccountName": self.storage.service_account if self.storage else None,
            "volumes": volumes or None,
            "containers": [container] if len(container) > 1 else None,
        }

    def _spread(self) -> dict:
        """Never two node pods of this job on one machine: without it, the scheduler (and Karpenter) may pack
        "4 pods x 1 GPU" onto a single 8-GPU instance, and the measured network path is not the one meant.
        The Trainer runs the job as a JobSet named after the TrainJob, whose pods carry that name."""
        return {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": self.name}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }

    def to_dict(self, trainer: str = "2.1.0") -> dict:
        """The TrainJob object (a dict) in the form of Trainer release `trainer`: podTemplateOverrides
        (2.1) or runtimePatches (2.2+)."""
        form = trainer_form(trainer)
        if self.capabilities and form == "podTemplateOverrides":
            raise WorkshopError(
                _(
                    "Trainer {trainer} cannot add container capabilities {caps} from a TrainJob "
                    "(podTemplateOverrides has no securityContext); use Trainer >= 2.2.0 or a custom "
                    "ClusterTrainingRuntime"
                ).format(trainer=trainer, caps=self.capabilities)
            )
        pod = {k: v for k, v in self._pod_spec(form).items() if v is not None}
        spec: dict = {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": self.runtime,
            },
            "trainer": {k: v for k, v in self._trainer().items() if v is not None},
        }
        meta = {"annotations": dict(self.pod_annotations)} if self.pod_annotations else None
        if pod and form == "podTemplateOverrides":
            spec["podTemplateOverrides"] = [
                {"targetJobs": [{"name": NODE_JOB}], **({"metadata": meta} if meta else {}), "spec": pod}
            ]
        elif pod:
            spec["runtimePatches"] = [_runtime_patch(pod, meta)]
        labels = {"app.kubernetes.io/part-of": "workshop", **self.labels}
        return {
            "apiVersion": API_VERSION,
            "kind": "TrainJob",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": labels,
                **({"annotations": dict(self.annotations)} if self.annotations else {}),
            },
            "spec": spec,
        }

    def documents(self, trainer: str = "2.1.0") -> list[dict]:
        """What goes into a manifest file (a list of dicts): the TrainJob only. The Secret is created
        separately, never rendered."""
        return [self.to_dict(trainer)]


# ------------------------------------------------------------------------------------- builders
DEFAULT_MODEL = "meta-llama/Meta-Llama-3-8B"  # EKS jobs fine-tune the real weights by default
# What every EKS job adds to the model's recipe (workshop.plan.models.recipe): about one epoch of wikitext-2
# on 4 nodes (~2.4 M Llama-3 tokens / 8192 tokens per step), gradient checkpointing (8B needs it), a
# checkpoint every 50 steps, and a 60-minute process-group timeout instead of the lessons' 10
# (train.DIST_TIMEOUT_MIN): here ranks sit in one collective while another node downloads the ~16 GB of
# weights from the hub, while ZeRO-3 gathers the 16-bit model onto rank 0 and rank 0 writes it, and while a
# ~100 GiB checkpoint (weights + optimizer state) goes to a SCRATCH_2 FSx volume of 1.2 TiB (~240 MB/s
# baseline: 7-8 minutes). 10 minutes is too close; an hour still ends a truly hung job the same hour.
JOB_SETTINGS = {"max_steps": 300, "save_steps": 50, "grad_ckpt": True, "dist_timeout_min": 60}


def train_args(
    model: str = DEFAULT_MODEL,
    *,
    name: str = "train",
    storage: OutputStorage | None = None,
    with_recipe: bool = True,
    **overrides,
) -> list[str]:
    """The node container's arguments to `workshop.train`: the model's recipe (fine-tuning settings for real
    weights, the lessons' for random ones), the job settings, the storage's output/resume/save flags, then
    `overrides`. Rendered by TrainArgs itself, validated first, so the TrainJob runs what torchrun would."""

    kw = {
        **(recipe(model) if with_recipe else {}),  # a plan's Job carries its own (planned_job)
        **JOB_SETTINGS,
        "model": model,
        **(
            storage.train_kwargs(name)
            if storage
            else {"output_dir": f"{OUTPUT_DIR}/{name}", "save_model": True}
        ),
        **overrides,
    }
    unknown = sorted(set(kw) - set(TrainArgs.__dataclass_fields__))
    if unknown:
        raise WorkshopError(
            f"unknown training argument(s) {unknown}; allowed: {', '.join(TrainArgs.__dataclass_fields__)}"
        )
    args = TrainArgs(**kw)
    args.validate()
    return args.to_argv()


def hf_home(storage: OutputStorage | None) -> str:
    """The hub cache: on the shared FSx volume the 16 GB of weights are downloaded once for every node and
    every restart (huggingface_hub's file locks work there: the volume is mounted with `flock`); else
    pod-local."""
    return (
        f"{storage.mount_path}/hf-cache"
        if storage is not None and storage.kind == "fsx"
        else "/workspace/hf-cache"
    )


def cpu_trainjob(
    name: str = "cpu-llama3",
    *,
    model: str = DEFAULT_MODEL,
    nodes: int | None = None,
    procs_per_node: int | None = None,
    node_pool: str = "cpu-amx",
    namespace: str = "default",
    registry: str = DEFAULT_REGISTRY,
    recommendation=None,
    cpu: str | None = None,
    memory: str | None = None,
    shm_size: str | None = None,
    threads_per_rank: int | None = None,
    hf_secret: HFTokenSecret | None = None,
    args: list[str] | None = None,
    storage: OutputStorage | None = None,
    **train_kw,
) -> TrainJobSpec:
    """The Xeon AMX job (a TrainJobSpec) from sizes it is given: CPU image, Karpenter pool + AMX taint, the
    recommendation's pod sizes (workshop.plan.fit) and /dev/shm; explicit `cpu`, `memory`, `shm_size`
    (Kubernetes quantities per pod: "180", "700Gi") and `threads_per_rank` win over them. Nothing is planned
    here: the job a plan file holds renders with workshop.k8s.planned_job.plan_trainjob.
    """
    given = None not in (cpu, memory, shm_size, threads_per_rank)
    nodes, procs_per_node, rec = sized(nodes, procs_per_node, recommendation, sizes_given=given)
    check_dns_label("node pool", node_pool)
    memory = memory or rec.memory_request
    threads = threads_per_rank or rec.threads_per_rank
    key, value, effect = AMX_TAINT
    if args is None:
        args = train_args(model, name=name, storage=storage, threads=threads, backend="gloo", **train_kw)
    return TrainJobSpec(
        name=name,
        namespace=namespace,
        image=image_ref("cpu", registry),
        train_args=args,
        nodes=nodes,
        procs_per_node=procs_per_node,
        requests={"cpu": str(cpu or rec.cpu_request), "memory": memory},
        limits={"memory": memory},
        env={"OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false", "HF_HOME": hf_home(storage)},
        storage=storage,
        hf_secret=hf_secret,
        node_selector={"karpenter.sh/nodepool": node_pool},
        tolerations=[{"key": key, "operator": "Equal", "value": value, "effect": effect}],
        shm_size=shm_size or rec.shm_size,
        one_pod_per_node=True,
        labels={"workshop/accelerator": "cpu"},
    )


def gpu_trainjob(
    name: str = "gpu-llama3",
    *,
    model: str = DEFAULT_MODEL,
    nodes: int = 4,
    instance_type: str = "p4d.24xlarge",
    gpus_per_node: int | None = None,
    efa_per_node: int | None = None,
    namespace: str = "default",
    registry: str = DEFAULT_REGISTRY,
    cpu: str | None = None,
    memory: str | None = None,
    shm_size: str = "64Gi",
    ipc_lock: bool = True,
    catalog_source: str | None = None,
    hf_secret: HFTokenSecret | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    one_pod_per_node: bool = True,
    storage: OutputStorage | None = None,
    **train_kw,
) -> TrainJobSpec:
    """The GPU job (a TrainJobSpec): CUDA/NCCL/EFA image, one rank per GPU, every EFA interface of the
    instance. `cpu`, `memory` and `shm_size` are Kubernetes quantities per pod.

    GPU and EFA counts default to the instance type's (from the catalog). IPC_LOCK lets libfabric pin
    memory for EFA; hostIPC is not needed because /dev/shm is a sized memory volume. Trainer v2.1 cannot
    add a capability from a TrainJob: render for it with ipc_lock=False (EKS AMIs already raise memlock).
    """
    check_nodes(nodes)
    gpus_per_node, efa_per_node = gpu_counts(instance_type, gpus_per_node, efa_per_node, catalog_source)
    requests, limits = gpu_resources(gpus_per_node, efa_per_node, cpu, memory)
    if args is None:
        args = train_args(model, name=name, storage=storage, backend="nccl", **train_kw)
    base_env = {"NCCL_DEBUG": "WARN", "TOKENIZERS_PARALLELISM": "false", "HF_HOME": hf_home(storage)}
    if efa_per_node:
        rdma = "1" if instance_type.startswith("p") else "0"
        base_env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": rdma})
    return TrainJobSpec(
        name=name,
        namespace=namespace,
        image=image_ref("gpu", registry),
        train_args=args,
        nodes=nodes,
        procs_per_node=gpus_per_node,
        requests=requests,
        limits=limits,
        env={**base_env, **(env or {})},
        hf_secret=hf_secret,
        node_selector={"node.kubernetes.io/instance-type": instance_type},
        tolerations=[
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "vpc.amazonaws.com/efa", "operator": "Exists", "effect": "NoSchedule"},
        ],
        shm_size=shm_size,
        capabilities=["IPC_LOCK"] if efa_per_node and ipc_lock else [],
        one_pod_per_node=one_pod_per_node,
        labels={"workshop/accelerator": "gpu"},
        storage=storage,
    )


# ------------------------------------------------------------------------------------- validation
def validate(spec_or_docs, trainer: str = "2.1.0") -> list:
    """The problems (a list of validate.Problem, empty = valid) of a spec or documents against the CRDs
    of `trainer`'s release (or its nearest same-form release): chapter 02's validator."""

    docs = spec_or_docs.documents(trainer) if isinstance(spec_or_docs, TrainJobSpec) else list(spec_or_docs)
    return validate_documents(docs, trainer=crd_release(trainer))


def migration_diff(spec: TrainJobSpec, old: str = "2.1.0", new: str = "2.2.0") -> str:
    """The unified diff (str) a reviewer sees when the same job moves from `old` to `new` Trainer."""

    return diff_yaml(
        spec.documents(old),
        spec.documents(new),
        old_name=f"trainer-v{normalize_trainer_version(old)}",
        new_name=f"trainer-v{normalize_trainer_version(new)}",
    )


def _runtime_patch(pod: dict, meta: dict | None) -> dict:
    """Trainer 2.2+'s form: the node job's pod template patched through runtimePatches (one manager)."""
    template = {**({"metadata": meta} if meta else {}), "spec": pod}
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": NODE_JOB, "template": {"spec": {"template": template}}},
                    ]
                }
            }
        },
    }
