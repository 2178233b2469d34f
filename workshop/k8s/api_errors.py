"""API errors in plain words: who cannot do what where (403), which component is missing when a CRD is not
served (404), which fields conflict (409), what a typed-patch 500 means for the manifest; and which answers
are retried (429 and 5xx with backoff, honouring Retry-After)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from workshop.errors import WorkshopError

# 500 is not among them: a real server answers 500 "failed to create typed patch object" to an apply whose
# manifest has a wrong type or an undeclared field, which no retry changes (client-go retries 5xx only with
# Retry-After, which urllib3 honours for 500 too through respect_retry_after_header).
RETRY_STATUSES = (429, 502, 503, 504)
TYPED_PATCH = "failed to create typed patch object"


class ClusterError(WorkshopError):
    """The API server refused a request; carries the HTTP status (0: no answer) and a plain explanation."""

    def __init__(self, status: int, message: str, *, missing_namespace: str | None = None):
        super().__init__(f"{message} (HTTP {status})" if status else message)
        self.status = status
        self.missing_namespace = missing_namespace  # a 404 because the namespace itself does not exist


def retries():
    """429/502/503/504 are retried with exponential backoff (0.5 s, 1 s, 2 s, 4 s) or the server's
    Retry-After; a refused connection is not (that is "no cluster", said at once)."""
    from urllib3.util.retry import Retry

    return Retry(
        total=4,
        connect=0,
        read=0,
        status=4,
        backoff_factor=0.5,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=None,
        raise_on_status=False,
        respect_retry_after_header=True,
    )


_TYPE_ERROR = re.compile(r"(\S+): expected (\w+), got &value\.\w+\{Value:(.*)\}")


def _typed_patch(message: str) -> str:
    """Every field the server's 500 'failed to create typed patch object (...): ...' names, each with its
    path, in plain words: '.spec.trainer.args[25]: expected string, got 2e-05 (a plain YAML number: quote
    it)'. One error is 'PATH: MESSAGE'; several are 'errors:' then one indented 'PATH: MESSAGE' line each
    (structured-merge-diff's ValidationErrors), all kept."""
    detail = message.split("): ", 1)[1] if "): " in message else message
    lines = [line.strip() for line in detail.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0] == "errors:":
        lines = lines[1:]
    said, plain, undeclared = [], [], False
    for line in lines:
        got = _TYPE_ERROR.fullmatch(line)
        if got:
            said.append(f"{got.group(1)}: expected {got.group(2)}, got {got.group(3)}")
            plain.append(got.group(3))
        else:
            said.append(line)
            undeclared |= "field not declared in schema" in line
    hints = []
    if plain:
        values = list(dict.fromkeys(plain))
        what = (
            f"a plain {values[0]} is not a string"
            if len(values) == 1
            else f"plain {', '.join(values)} are not strings"
        )
        hints.append(
            f"in YAML {what} to kubectl: quote it, or render the file with `python -m workshop render`"
        )
    if undeclared:
        hints.append(
            "the cluster's CRD does not declare that field: is the release on the cluster the one the "
            "manifest was rendered for? `python -m workshop validate --trainer X.Y.Z FILE`"
        )
    text = "; ".join(said) if len(said) > 1 else (said[0] if said else detail)
    if len(said) > 1:
        text = f"{len(said)} fields: {text}"
    return text + (f" ({'; '.join(hints)})" if hints else "")


def plural(kind: str) -> str:
    return kind.lower() + ("es" if kind.endswith("s") else "s")


def status_body(exc) -> dict:
    try:
        body = json.loads(getattr(exc, "body", None) or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def guarded(make, explain_error: Callable[[Exception], ClusterError]):
    """Iterate a client stream, turning its API and network errors into ClusterErrors."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        yield from make()
    except (ApiException, HTTPError) as exc:
        raise explain_error(exc) from exc


def explain(
    exc,
    verb: str,
    kind: str,
    name: str | None = None,
    namespace: str | None = None,
    *,
    host: str,
    user: str = "",
    where: str = "",
    namespace_missing: Callable[[str], bool] = lambda namespace: False,
) -> ClusterError:
    """The ClusterError a kubernetes-client exception (or a network error) means, in one plain sentence.
    `host` is the API server, `user` the kubeconfig user, `where` the kubeconfig and context."""
    from kubernetes.client.exceptions import ApiException

    if not isinstance(exc, ApiException):  # urllib3: refused, reset, timed out
        return ClusterError(0, f"the API server at {host} did not answer ({type(exc).__name__}: {exc})")
    status, body = exc.status or 0, status_body(exc)
    message = body.get("message") or exc.reason or ""
    what = plural(kind) if kind[:1].isupper() else kind
    scope = f"in namespace {namespace}" if namespace else "cluster-wide"
    obj = f"{kind}/{name}" if name else what
    if status == 403:
        return _forbidden(user, verb, what, scope, message, namespace)
    if status == 401:
        return ClusterError(
            401,
            f"the API server at {host} did not accept the kubeconfig's credentials ({where}); "
            "refresh them (e.g. `aws eks update-kubeconfig`)",
        )
    if status == 404:
        return _not_found(body, verb, obj, scope, namespace, namespace_missing)
    if status == 409 and verb == "apply":
        causes = (body.get("details") or {}).get("causes") or []
        fields = [f"{c.get('field', '?')} ({c.get('message', '')})" for c in causes] or [message]
        return ClusterError(
            409,
            f"{obj} {scope}: conflicts with another field manager over {'; '.join(fields)}. "
            "Drop those fields from the manifest, or take them over with force=True (`--force-conflicts`)",
        )
    if status == 500 and TYPED_PATCH in message:
        return ClusterError(500, f"the server cannot take {obj} {scope}: {_typed_patch(message)}")
    if status in RETRY_STATUSES:
        return ClusterError(
            status,
            f"the API server is still answering {status} ({message or exc.reason}) "
            f"to {verb} {obj} after {retries().total} retries with backoff; try again later",
        )
    return ClusterError(status, f"cannot {verb} {obj} {scope}: {message}")


def _forbidden(
    user: str, verb: str, what: str, scope: str, message: str, namespace: str | None
) -> ClusterError:
    who = f"the kubeconfig user {user!r}" if user else "this client's user"
    rbac = {"apply": "patch", "get logs of": "get", "follow logs of": "get"}.get(verb, verb)
    doing = "create or change" if verb == "apply" else verb
    return ClusterError(
        403,
        f"{who} cannot {doing} {what} {scope}: {message}. Ask the cluster admin "
        f"for a Role that allows it (check with `kubectl auth can-i {rbac} {what}"
        + (f" -n {namespace}`)" if namespace else "`)"),
    )


def _not_found(
    body: dict,
    verb: str,
    obj: str,
    scope: str,
    namespace: str | None,
    namespace_missing: Callable[[str], bool],
) -> ClusterError:
    """A 404: the namespace itself missing (said so, with how to make or find it), or the object."""
    details = body.get("details") or {}
    if namespace and details.get("kind") == "namespaces" and details.get("name") == namespace:
        return ClusterError(
            404,
            f"namespace {namespace!r} does not exist (so no {obj} in it): create it with "
            f"`kubectl create namespace {namespace}` or pick another",
            missing_namespace=namespace,
        )
    if (
        namespace
        and verb in ("get", "list", "get logs of", "follow logs of")
        and namespace_missing(namespace)
    ):
        return ClusterError(
            404,
            f"namespace {namespace!r} does not exist (so no {obj} in it): check the namespace "
            "(`kubectl get namespaces`)",
            missing_namespace=namespace,
        )
    return ClusterError(404, f"{obj} not found {scope}")
