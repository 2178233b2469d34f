"""A TrainJob's life on a cluster: submit, wait for a condition, stream rank 0's log, parse it, delete.

Built on chapter 02's `Cluster` (server-side apply, polling, pod logs). Everything that can be checked
before a request is checked first — the manifest against the Trainer release's CRDs, the Secret the job
references — so a mistake fails here with its name, not as a pod stuck in CreateContainerConfigError.
Without a cluster (`connect()` returned None) `run_on_cluster` says so in one line and returns None,
and the notebook carries on with the namespace simulation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import TEARDOWN_COMMAND
from workshop.k8s.cluster import connect
from workshop.k8s.logs import follow_logs
from workshop.k8s.storage import MODEL_ANNOTATION, model_dir
from workshop.k8s.trainjob import NODE_JOB, HFTokenSecret, TrainJobSpec, crd_release
from workshop.k8s.validate import ensure_valid
from workshop.train.logs import parse_metrics, parse_zero_stages

# TrainJob conditions (Trainer v2): Created, Suspended, Complete, Failed.
CONDITIONS = ("Created", "Complete", "Failed", "Suspended")


def rank0_selector(job_name: str) -> str:
    """Pod labels of the first node of a TrainJob: JobSet names pods <job>-node-0-0-<hash>."""
    return (
        f"jobset.sigs.k8s.io/jobset-name={job_name},jobset.sigs.k8s.io/replicatedjob-name={NODE_JOB},"
        "jobset.sigs.k8s.io/job-index=0,batch.kubernetes.io/job-completion-index=0"
    )


def ensure_secret(cluster, secret: HFTokenSecret, *, create: bool = True) -> str:
    """Make sure the Secret exists: 'present', or 'created' from its value. Missing and no value -> error
    (before anything is submitted). The token goes only into the API request body, never into output."""
    try:
        cluster.get("Secret", secret.name, secret.namespace)
        return "present"
    except ClusterError as exc:
        if exc.status != 404 or getattr(exc, "missing_namespace", None):  # not a missing Secret
            raise
    if not (create and secret.value):
        raise WorkshopError(
            f"Secret {secret.namespace}/{secret.name} does not exist and no token was given; "
            f"create it with:\n  {secret.kubectl_command()}"
        )
    cluster.apply([secret.api_body()], namespace=secret.namespace, validate=False)
    return "created"


@dataclass
class Submitted:
    name: str
    namespace: str
    trainer: str
    secret: str | None = None  # 'present' / 'created' / None (no secret referenced)
    notes: list[str] = field(default_factory=list)


def submit(
    cluster, spec: TrainJobSpec, *, trainer: str = "2.1.0", replace: bool = True, dry_run: bool = False
) -> Submitted:
    """Validate against the release's CRDs, check the Secret, (re)create the TrainJob.

    A TrainJob's `spec.trainer` and runtimeRef are immutable, so `replace` deletes an older job of the same
    name first (what the original workshop did by hand with `kubectl delete trainjob`)."""

    docs = spec.documents(trainer)
    ensure_valid(docs, trainer=crd_release(trainer))  # before anything is sent, Secret included
    secret_state = ensure_secret(cluster, spec.hf_secret) if spec.hf_secret is not None else None
    if (
        spec.storage is not None and spec.storage.documents()
    ):  # the volume the job keeps its outputs on, first
        cluster.apply(spec.storage.documents(), dry_run=dry_run, namespace=spec.namespace, validate=False)
    if replace and not dry_run and cluster.delete("TrainJob", spec.name, spec.namespace):
        _wait_gone(cluster, spec.name, spec.namespace)
    cluster.apply(docs, dry_run=dry_run, namespace=spec.namespace, trainer=crd_release(trainer))
    return Submitted(spec.name, spec.namespace, trainer, secret_state)


def _wait_gone(cluster, name: str, namespace: str, timeout: float = 120, interval: float = 2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            cluster.get("TrainJob", name, namespace)
        except ClusterError as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(interval)
    raise WorkshopError(f"TrainJob {namespace}/{name} is still being deleted after {timeout:.0f} s")


def status(cluster, name: str, namespace: str = "default") -> dict[str, str]:
    """condition type -> status ('True'/'False') of a TrainJob right now."""
    obj = cluster.get("TrainJob", name, namespace)
    return {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}


def wait(
    cluster,
    name: str,
    namespace: str = "default",
    *,
    until: tuple[str, ...] = ("Complete", "Failed"),
    timeout: float = 3600,
    interval: float = 10,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """The first condition of `until` that turns True, or None when `timeout` passes (never hangs)."""
    for cond in until:
        check_choice("TrainJob condition", cond, CONDITIONS)
    check_positive("timeout", timeout)
    deadline = clock() + timeout
    while True:
        try:
            now = status(cluster, name, namespace)
        except ClusterError as exc:
            if exc.status != 404:
                raise
            now = {}
        for cond in until:
            if now.get(cond) == "True":
                return cond
        if clock() + interval > deadline:
            return None
        sleep(interval)


def rank0_pod(
    cluster,
    name: str,
    namespace: str = "default",
    *,
    timeout: float = 900,
    interval: float = 5,
    echo: Callable[[str], None] | None = None,
) -> str | None:
    """Name of the rank-0 pod once it exists (None on timeout), saying every minute what it waits for."""
    check_positive("pod wait", timeout)
    start = time.monotonic()
    said = -1e18
    while True:
        items = (
            cluster.get("Pod", namespace=namespace, label_selector=rank0_selector(name)).get("items") or []
        )
        if items:
            return items[0]["metadata"]["name"]
        waited = time.monotonic() - start
        if echo and waited - said >= 60:
            echo(f"waiting for the rank-0 pod of TrainJob {namespace}/{name} ({waited:.0f}/{timeout:g} s)")
            said = waited
        if waited + interval > timeout:
            return None
        time.sleep(interval)


def why_no_pod(cluster, name: str, namespace: str, waited: float) -> str:
    """Why a TrainJob has no rank-0 pod: no Trainer controller (no status, no JobSet), or its conditions."""
    try:
        job = cluster.get("TrainJob", name, namespace)
    except ClusterError as exc:
        return f"the TrainJob cannot be read ({exc})"
    if not (job.get("status") or {}).get("conditions"):
        try:
            cluster.get("JobSet", name, namespace)
            jobset = "its JobSet exists"
        except ClusterError:
            jobset = "no JobSet was made for it"
        return (
            f"the TrainJob has no status after {waited:.0f} s and {jobset}: no Kubeflow Trainer controller "
            "answered (is it installed and running? `kubectl get pods -n kubeflow-system`)"
        )
    true = [c.get("type") for c in job["status"]["conditions"] if c.get("status") == "True"]
    return (
        f"the TrainJob is {', '.join(true) or 'without a true condition'}; its pods wait for nodes: "
        f"`kubectl describe trainjob {name} -n {namespace}`, `kubectl get nodeclaims`"
    )


def stream_rank0(
    cluster,
    name: str,
    namespace: str = "default",
    *,
    timeout: float = 3600,
    wait_s: float = 900,
    echo: Callable[[str], None] | None = print,
) -> Iterator[str]:
    """Rank 0's log lines as they are written (what `kubectl logs -f <job>-node-0-0-...` shows), after
    waiting up to `wait_s` for the pod to appear and start (a node may take minutes to come up)."""
    start = time.monotonic()
    pod = rank0_pod(cluster, name, namespace, timeout=wait_s, echo=echo)
    if pod is None:
        raise WorkshopError(
            f"no rank-0 pod for TrainJob {namespace}/{name} appeared in {wait_s:g} s: "
            + why_no_pod(cluster, name, namespace, time.monotonic() - start)
        )
    left = max(1.0, wait_s - (time.monotonic() - start))
    yield from follow_logs(
        cluster, pod, namespace, container=NODE_JOB, timeout=timeout, wait_s=left, say=echo
    )


def parse(lines) -> dict:
    """Chapter 04's parsers over a log: per-step metrics and DeepSpeed's ZeRO memory-stage lines."""

    text = lines if isinstance(lines, str) else "\n".join(lines)
    return {"steps": parse_metrics(text), "zero_stages": parse_zero_stages(text)}


def delete(cluster, name: str, namespace: str = "default") -> bool:
    """Delete the TrainJob (its JobSet, pods and services go with it); False when it was not there."""
    return cluster.delete("TrainJob", name, namespace)


def saved_model(spec: TrainJobSpec) -> tuple[str, str] | None:
    """(claim name, path of the final model on it) when the job saves its model onto an FSx claim, else
    None."""
    storage = spec.storage
    if storage is None or storage.kind != "fsx" or storage.claim is None:
        return None
    path = model_dir(list(spec.train_args), storage.mount_path)
    return (storage.claim.name, path) if path else None


def mark_saved_model(cluster, spec: TrainJobSpec) -> str | None:
    """After a Complete job: annotate its claim `models.workshop.example.com/<job>: <path>` (a merge patch,
    nothing else on the claim changes), so `workshop cluster teardown` knows the claim holds a trained model
    once the job itself is gone. The path, or None when the job keeps no model on a claim."""
    found = saved_model(spec)
    if found is None:
        return None
    claim, path = found
    cluster.patch(
        "PersistentVolumeClaim",
        claim,
        spec.namespace,
        {"metadata": {"annotations": {MODEL_ANNOTATION + spec.name: path}}},
        api_version="v1",
    )
    return path


def run_on_cluster(
    spec: TrainJobSpec,
    *,
    trainer: str = "2.1.0",
    cluster=None,
    timeout: float = 3600,
    wait_s: float = 900,
    keep: bool = False,
    echo: Callable[[str], None] | None = print,
) -> dict | None:
    """Submit, follow rank 0, wait, parse; delete only a job that ended Complete (its outputs are on the
    volume or in S3 by then; a model on an FSx claim is first recorded on the claim, see `mark_saved_model`).
    A failed, timed-out or interrupted job is kept for `kubectl describe` and logs, and a resubmission
    resumes from its last checkpoint. `timeout` and `wait_s` are in seconds: `wait_s` is how long the rank-0
    pod may take to appear and start (Karpenter bringing nodes); when it does not, the outcome says why and
    what stays.

    Returns a dict: 'submitted', 'outcome' (the TrainJob's final condition) and what `parse` reads from rank
    0's log; None (after one plain line) when no cluster answers."""
    if cluster is None:
        cluster = connect()
    if cluster is None:
        return None
    sub = submit(cluster, spec, trainer=trainer)
    lines: list[str] = []
    try:
        for line in stream_rank0(
            cluster, spec.name, spec.namespace, timeout=timeout, wait_s=wait_s, echo=echo
        ):
            lines.append(line)
            if echo and (line.startswith("METRIC ") or "error" in line.lower()):
                echo(line)
    except WorkshopError as exc:  # no pod: say so and what stays, and let the notebook go on to its clean-up
        if echo:
            echo(
                f"{exc}. Left on the cluster: TrainJob {spec.namespace}/{spec.name} (and what it made); "
                f"`{TEARDOWN_COMMAND}` lists it, `--yes` removes it"
            )
        return {"submitted": sub, "outcome": "no rank-0 pod", "error": str(exc), **parse(lines)}
    outcome = wait(cluster, spec.name, spec.namespace, timeout=max(60.0, timeout / 10))
    if outcome == "Complete":
        try:  # the claim says it holds the model before the job that says so is deleted
            mark_saved_model(cluster, spec)
        except ClusterError as exc:
            keep = True
            if echo:
                echo(
                    f"could not mark the claim as holding the model ({exc}); "
                    "the TrainJob is kept as the record"
                )
    if outcome == "Complete" and not keep:
        delete(cluster, spec.name, spec.namespace)
    elif echo:
        echo(
            f"TrainJob {spec.namespace}/{spec.name} ended {outcome or 'not yet (timeout)'}: "
            f"kept for inspection; `kubectl delete trainjob {spec.name} -n {spec.namespace}` when done"
        )
    return {"submitted": sub, "outcome": outcome, **parse(lines)}
