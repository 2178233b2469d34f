"""Waits on a cluster that run side by side, show progress and, when nothing answers, say who did not.

One poll pass reads every object, so four objects take as long as the slowest, not the sum. A NodePool with no
status conditions at all after the wait was never looked at by a Karpenter controller; a TrainJob with no
status was never looked at by the Trainer's. That is what a learner needs to hear, with what is left on the
cluster and what removes it, instead of a bare "not Ready".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from workshop.errors import check_positive
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.base import TEARDOWN_COMMAND
from workshop.k8s.cluster import conditions
from workshop.lang import _

# kind -> (the controller that writes its status, how to look for it)
CONTROLLERS = {
    "NodePool": ("Karpenter", "kubectl get pods -A -l app.kubernetes.io/name=karpenter"),
    "EC2NodeClass": ("Karpenter", "kubectl get pods -A -l app.kubernetes.io/name=karpenter"),
    "NodeClaim": ("Karpenter", "kubectl get pods -A -l app.kubernetes.io/name=karpenter"),
    "TrainJob": ("Kubeflow Trainer", "kubectl get pods -n kubeflow-system"),
}


def ref(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{kind}/{namespace + '/' if namespace else ''}{name}"


def diagnose(kind: str, name: str, obj: dict | None, condition: str, waited: float) -> str:
    """Why an object is not `condition` after `waited` seconds, in one line."""
    what = f"{kind}/{name}"
    if obj is None:
        return _("{what}: not on the cluster (deleted, or never created)").format(what=what)
    conds = (obj.get("status") or {}).get("conditions") or []
    if not conds:
        controller, look = CONTROLLERS.get(kind, (None, "kubectl get pods -A"))
        said = (
            _(
                "{what}: no status at all after {waited:.0f} s: no {controller} controller answered "
                "(is it installed and running? `{look}`)"
            )
            if controller
            else _(
                "{what}: no status at all after {waited:.0f} s: its controller did not answer "
                "(is it installed and running? `{look}`)"
            )
        )
        return said.format(what=what, waited=waited, controller=controller, look=look)
    for c in conds:
        if c.get("type") == condition:
            why = ": ".join(x for x in (c.get("reason"), c.get("message")) if x)
            said = _("{what}: {condition} is {status}").format(
                what=what, condition=condition, status=c.get("status")
            )
            return said + (f" ({why})" if why else "")
    true = [c.get("type") for c in conds if c.get("status") == "True"]
    if not true:
        return _("{what}: no {condition} condition yet (none true)").format(what=what, condition=condition)
    return _("{what}: no {condition} condition yet (true: {true})").format(
        what=what, condition=condition, true=", ".join(true)
    )


def wait_ready(
    cluster,
    objects: Sequence[tuple[str, str, str | None]],
    *,
    condition: str = "Ready",
    timeout: float,
    interval: float = 5.0,
    echo: Callable[[str], None] | None = print,
    progress: bool = True,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, bool]:
    """'Kind/name' -> whether `condition` turned True within `timeout` seconds, all objects polled together.
    What is not Ready is explained (`diagnose`) and named as left on the cluster, with what removes it."""
    check_positive("timeout", timeout)
    start = clock()
    last: dict[tuple, dict | None] = {o: None for o in objects}
    done: dict[tuple, bool] = {o: False for o in objects}
    bar = None
    if progress and objects:
        from workshop.launch.progress import bar as make_bar

        bar = make_bar(len(objects), _("waiting for {condition}").format(condition=condition), unit="object")
    try:
        while True:
            for o in [o for o in objects if not done[o]]:
                kind, name, namespace = o
                try:
                    last[o] = cluster.get(kind, name, namespace)
                except ClusterError as exc:
                    if exc.status != 404:
                        raise
                    last[o] = None
                now = last[o]
                if now is not None and conditions(now).get(condition) == "True":
                    done[o] = True
                    if bar is not None:
                        bar.update(1)
            pending = [o for o in objects if not done[o]]
            if bar is not None:
                bar.set_postfix_str(", ".join(f"{k}/{n}" for k, n, _ in pending)[:80])
            if not pending or clock() - start + interval > timeout:
                break
            sleep(interval)
    finally:
        if bar is not None:
            bar.close()
    pending = [o for o in objects if not done[o]]
    if pending and echo:
        waited = clock() - start
        for o in pending:
            echo(diagnose(o[0], o[1], last[o], condition, waited))
        echo(
            _(
                "left on the cluster: {objects}; `{command}` lists them, `{command} --yes` removes them"
            ).format(
                objects=", ".join(ref(*o) for o in pending if last[o] is not None), command=TEARDOWN_COMMAND
            )
        )
    return {f"{k}/{n}": done[(k, n, ns)] for k, n, ns in objects}


# `cluster delete`: how long a deleted object may take to go before it is called Terminating, in seconds
SETTLE_S = 10.0


def current(cluster, kind: str, name: str, namespace: str | None, api_version: str | None) -> dict | None:
    """The object as the server has it now; None once it is gone (any other refusal is raised)."""
    try:
        return cluster.get(kind, name, namespace, api_version=api_version)
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise


def settle(cluster, docs: list[dict], interval: float = 0.5) -> dict[int, dict]:
    """id(doc) -> the object, for the deleted manifests still there after up to SETTLE_S seconds: a
    controller often removes a finalizer within a second of the DELETE (kube-controller-manager's
    pvc-protection for a claim no pod mounts), so an immediate re-read would call Terminating what is gone a
    moment later."""
    deadline = time.monotonic() + SETTLE_S

    def still_there(doc: dict) -> dict | None:
        meta = doc.get("metadata") or {}
        return current(cluster, doc["kind"], meta["name"], meta.get("namespace"), doc.get("apiVersion"))

    while True:
        left = {id(d): obj for d in docs if (obj := still_there(d)) is not None}
        if not left or time.monotonic() + interval > deadline:
            return left
        docs = [d for d in docs if id(d) in left]
        time.sleep(interval)
