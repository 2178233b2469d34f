"""A pod's log for a learner: why a pod has no log yet, and `kubectl logs -f` that waits for a pod that is not
scheduled or started (on EKS the normal state while Karpenter brings a node)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from workshop.errors import WorkshopError, check_positive
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.cluster import conditions


def pod_waiting(cluster, pod: str, namespace: str) -> str | None:
    """Why a pod has no log yet ('Pending: not scheduled', 'ContainerCreating'), or None when its
    containers run or ran (or the pod is gone)."""
    try:
        obj = cluster.get("Pod", pod, namespace)
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise
    status = obj.get("status") or {}
    for c in status.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting:
            return waiting.get("reason") or "waiting to start"
    if status.get("phase", "Pending") == "Pending":
        scheduled = conditions(obj).get("PodScheduled")
        return "Pending: " + ("not scheduled yet" if scheduled != "True" else "containers not started")
    return None


def follow_logs(
    cluster,
    pod: str,
    namespace: str = "default",
    *,
    container: str | None = None,
    timeout: float = 3600,
    wait_s: float = 900,
    interval: float = 2.0,
    say: Callable[[str], None] | None = print,
) -> Iterator[str]:
    """`kubectl logs -f` that waits for a pod not yet scheduled or started (the server answers 204 or
    'waiting to start'; on EKS the normal state while Karpenter brings a node), saying why, for at most
    `wait_s` seconds, then follows the log to its end."""
    check_positive("wait", wait_s)
    start = time.monotonic()
    said = None
    while True:
        got = 0
        try:
            for line in cluster.logs(pod, namespace, container=container, follow=True, timeout=timeout):
                got += 1
                yield line
        except ClusterError as exc:
            if exc.status != 400 or "waiting to start" not in str(exc):
                raise
        if got:
            return
        why = pod_waiting(cluster, pod, namespace)
        if why is None:
            return  # it ran (and printed nothing) or is gone
        waited = time.monotonic() - start
        if waited + interval > wait_s:
            raise WorkshopError(
                f"pod {namespace}/{pod} has not started after {wait_s:g} s ({why}); "
                f"`kubectl describe pod {pod} -n {namespace}` says why"
            )
        if say and why != said:
            say(f"waiting for pod {namespace}/{pod} to start ({why}; {waited:.0f} s so far)")
            said = why
        time.sleep(interval)
