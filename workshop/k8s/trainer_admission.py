"""What Kubeflow Trainer's admission webhook would refuse in a TrainJob, checked before anything is sent, and
what a TrainJob needs on the cluster that no admission checks (the Secret and claim its pods read).

The webhook (pkg/webhooks/trainjob_webhook.go of the pinned releases) looks up the ClusterTrainingRuntime
`spec.runtimeRef` names ("specified clusterTrainingRuntime must be created before the TrainJob is created")
and runs its runtime's plugin checks: a torch runtime refuses the environment names torchrun's launcher sets
itself (`spec.trainer.env`: "must not have reserved envs"), from 2.3 an MPI runtime the OpenMPI ones and an
XGBoost runtime the DMLC ones. Offline, `webhook_problems` judges the runtime name against the runtimes the
release's runtimes overlay ships (`RUNTIMES`, read from manifests/base/runtimes at each pinned tag) and the
reserved names; with a cluster, `missing_on_cluster` says which runtime, Secret or claim is not there (a
missing Secret or claim passes every admission check, then holds the pods in CreateContainerConfigError or
Pending).
"""

from __future__ import annotations

from workshop.k8s.api_errors import ClusterError
from workshop.k8s.schema import Problem

# the ClusterTrainingRuntimes each pinned release's runtimes overlay ships (manifests/overlays/runtimes)
RUNTIMES: dict[str, tuple[str, ...]] = {
    "2.1.0": (
        "deepspeed-distributed",
        "mlx-distributed",
        "torch-distributed",
        "torchtune-llama3.2-1b",
        "torchtune-llama3.2-3b",
        "torchtune-qwen2.5-1.5b",
    ),
    "2.3.0": (
        "deepspeed-distributed",
        "jax-distributed",
        "mlx-distributed",
        "torch-distributed",
        "torchtune-llama3.2-1b",
        "torchtune-llama3.2-3b",
        "torchtune-qwen2.5-1.5b",
        "xgboost-distributed",
    ),
}
# each shipped runtime's mlPolicy (what picks the plugin whose reserved names apply)
POLICY = {
    "torch-distributed": "torch",
    "torchtune-llama3.2-1b": "torch",
    "torchtune-llama3.2-3b": "torch",
    "torchtune-qwen2.5-1.5b": "torch",
    "deepspeed-distributed": "mpi",
    "mlx-distributed": "mpi",
    "jax-distributed": "jax",
    "xgboost-distributed": "xgboost",
}
# pkg/constants: TorchRunReservedEnvNames (every 2.x), MPIReservedEnvNames and XGBoostReservedEnvNames (2.3)
RESERVED_ENV = {
    "torch": ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"),
    "mpi": (
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    ),
    "xgboost": ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"),
}
RESERVED_FROM = {"torch": "2.0.0", "mpi": "2.3.0", "xgboost": "2.3.0"}  # the first release that refuses them
TORCHTUNE_ENTRYPOINT = ["tune", "run"]
RULE = "Trainer admission webhook"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def runtime_ref(doc: dict) -> tuple[str, str]:
    """(kind, name) of the runtime a TrainJob names; kind defaults to ClusterTrainingRuntime, as the CRD's."""
    ref = (doc.get("spec") or {}).get("runtimeRef") or {}
    return str(ref.get("kind") or "ClusterTrainingRuntime"), str(ref.get("name") or "")


def webhook_problems(doc: dict, label: str, release: str) -> list[Problem]:
    """What the webhook of Trainer `release` would refuse in this TrainJob, offline: a ClusterTrainingRuntime
    the release does not ship, environment names the runtime's launcher reserves. A release without a
    runtime list (one added by `workshop crds fetch`) is judged on the reserved names only."""
    if doc.get("kind") != "TrainJob":
        return []
    where = f"Trainer {release}"
    problems = []
    kind, name = runtime_ref(doc)
    shipped = RUNTIMES.get(release)
    if kind == "ClusterTrainingRuntime" and shipped is not None and name not in shipped:
        problems.append(
            Problem(
                label,
                "spec.runtimeRef.name",
                RULE,
                f"ClusterTrainingRuntime {name!r} is not one Trainer {release} ships "
                f"({', '.join(shipped)}); the webhook refuses a TrainJob whose runtime does not exist",
                where,
            )
        )
    trainer = (doc.get("spec") or {}).get("trainer") or {}
    policy = POLICY.get(name, "") if kind == "ClusterTrainingRuntime" else ""
    reserved = RESERVED_ENV.get(policy, ())
    if _version_key(release) < _version_key(RESERVED_FROM.get(policy, "0")):
        reserved = ()
    if (
        policy == "torch"
        and release.startswith("2.1.")
        and (trainer.get("command") == TORCHTUNE_ENTRYPOINT or trainer.get("numProcPerNode") is None)
    ):
        reserved = ()  # 2.1's torch plugin checks only with numProcPerNode set and not for `tune run`
    names = sorted(
        {str(e.get("name")) for e in trainer.get("env") or [] if isinstance(e, dict)} & set(reserved)
    )
    if names:
        problems.append(
            Problem(
                label,
                "spec.trainer.env",
                RULE,
                f"must not set {', '.join(names)}: runtime {name!r} ({policy}) sets them itself, and the "
                f"webhook refuses them (reserved: {', '.join(reserved)})",
                where,
            )
        )
    return problems


def _walk(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def needs(doc: dict) -> dict[str, set[str]]:
    """What a TrainJob's pods read from its namespace: {"Secret": names, "PersistentVolumeClaim": names}."""
    out: dict[str, set[str]] = {"Secret": set(), "PersistentVolumeClaim": set()}
    for d in _walk(doc.get("spec") or {}):
        for key, kind, field in (
            ("secretKeyRef", "Secret", "name"),
            ("secretRef", "Secret", "name"),
            ("secret", "Secret", "secretName"),
            ("persistentVolumeClaim", "PersistentVolumeClaim", "claimName"),
        ):
            ref = d.get(key)
            if isinstance(ref, dict) and ref.get(field):
                out[kind].add(str(ref[field]))
    return out


def _exists(cluster, kind: str, name: str, namespace: str | None) -> bool | None:
    try:
        cluster.get(kind, name, namespace)
    except ClusterError as exc:
        return False if exc.status == 404 else None
    return True


def missing_on_cluster(cluster, docs: list[dict]) -> list[str]:
    """One sentence per runtime, Secret or claim a TrainJob in `docs` names that is neither on the cluster
    nor among `docs` themselves (what the same apply creates). An object that cannot be read (403) is not
    said to be missing."""
    sent = {(d.get("kind"), (d.get("metadata") or {}).get("name")) for d in docs}
    said = []
    for doc in docs:
        if doc.get("kind") != "TrainJob":
            continue
        meta = doc.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        job = f"TrainJob {ns}/{meta.get('name')}"
        kind, name = runtime_ref(doc)
        if (kind, name) not in sent and _exists(
            cluster, kind, name, ns if kind == "TrainingRuntime" else None
        ) is False:
            said.append(
                f"{job}: its runtime {kind} {name!r} is not on the cluster; Trainer's webhook refuses the "
                "job until it is (install the Trainer runtimes, `kubectl get clustertrainingruntimes`)"
            )
        for need, names in needs(doc).items():
            for ref in sorted(names):
                if (need, ref) not in sent and _exists(cluster, need, ref, ns) is False:
                    effect = (
                        "its pods would wait in CreateContainerConfigError"
                        if need == "Secret"
                        else "its pods would stay Pending"
                    )
                    said.append(f"{job}: {need} {ns}/{ref} does not exist; {effect} until it does")
    return said
