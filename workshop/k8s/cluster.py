"""The cluster layer: connect, server-side apply, get/wait/watch, logs, delete — and a plain "no cluster"
path.

Everything goes through the `kubernetes` client's own APIs, the ones kubectl-like tools are built on:
- `kubernetes.dynamic.DynamicClient` finds each kind through API discovery (no table of paths here) and does
  server-side apply (`fieldManager`, `dryRun=All` for a server dry run, `force` only when asked — a 409
  names the fields and the manager that owns them, as `kubectl apply --server-side` does);
- the typed `CoreV1Api` reads pods and logs; `kubernetes.watch.Watch` follows a log and watches objects,
  resuming from the last resourceVersion when a stream is cut and re-listing after 410 Gone;
- urllib3's `Retry` (the client's `Configuration.retries`) retries 429 and 5xx answers with backoff,
  honouring Retry-After;
- an API error becomes one plain sentence (`api_errors`): who cannot do what where (403), which component
  is missing when a CRD is not served (404 in discovery), which fields conflict (409).
Without a kubeconfig or a reachable API server, `connect()` prints why and returns None, so a notebook keeps
going offline and shows what it would have applied (`required=True`: a NoCluster error instead, for
`teardown`, which has nothing to do offline).

The Kubeflow SDK (`kubeflow` 0.5.0, TrainerClient) was evaluated for submit/wait/logs and is not used: it pins
`kubernetes>=27.2.0,<36.0.0` (this environment resolves kubernetes 37.0.1; this module also runs on 35, so the
two could share kubernetes 35, but the SDK would hold the client back) and `kubeflow-trainer-api>=2.3.0,<2.4`
(its models speak Trainer 2.3 only, while the workbook renders 2.1 and 2.2+ forms); `train()` builds its own
TrainJob from its runtime types rather than applying a rendered, offline-validated manifest, creates instead
of server-side applying (no dry run), and wraps every API error into "Failed to create TrainJob". Its
`get_job_logs(follow=True)` is `Watch().stream(read_namespaced_pod_log, follow=True)` — what `logs()` does
here.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from workshop.errors import WorkshopError, check_positive
from workshop.k8s.api_errors import ClusterError, explain, guarded, plural, retries
from workshop.k8s.base import workbook_labels
from workshop.k8s.kubeconfig import configure
from workshop.k8s.validate import KIND_FAMILY, ensure_valid
from workshop.lang import _

# The oldest `kubernetes` release tests/k8s/test_cluster.py was run against (it passes on 31.0.0, 35.0.0
# and 37.0.1). Nothing here calls ApiClient.param_serialize (37+); DynamicClient.server_side_apply, the newest
# API used, exists from 21 on (absent in 18.20).
MIN_KUBERNETES = 31

# apiVersion of the kinds the workbook names by kind alone; paths, plurals and scope come from discovery.
API_VERSIONS = {
    "NodePool": "karpenter.sh/v1",
    "NodeClaim": "karpenter.sh/v1",
    "EC2NodeClass": "karpenter.k8s.aws/v1",
    "TrainJob": "trainer.kubeflow.org/v1alpha1",
    "TrainingRuntime": "trainer.kubeflow.org/v1alpha1",
    "ClusterTrainingRuntime": "trainer.kubeflow.org/v1alpha1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
    **{
        kind: "v1"
        for kind in (
            "Secret",
            "ConfigMap",
            "Pod",
            "Node",
            "Namespace",
            "Event",
            "Service",
            "PersistentVolumeClaim",
            "PersistentVolume",
        )
    },
    "StorageClass": "storage.k8s.io/v1",
}
# API group -> what installs it (named when its CRDs are missing)
COMPONENTS = {
    "trainer.kubeflow.org": "Kubeflow Trainer",
    "karpenter.sh": "Karpenter",
    "karpenter.k8s.aws": "Karpenter's AWS provider",
    "jobset.x-k8s.io": "JobSet",
}


class NoCluster(WorkshopError):
    """`connect(required=True)` found no usable kubeconfig or no API server answering; says which
    (`reason`: that sentence alone, for the preflight's "not checked" lines)."""

    def __init__(self, reason: str):
        super().__init__(_("no cluster: {reason}").format(reason=reason))
        self.reason = reason


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    namespace: str | None
    dry_run: bool
    uid: str | None

    def __str__(self) -> str:
        if self.namespace and self.dry_run:
            text = _("{kind}/{name} in {namespace} applied (server dry run, nothing stored)")
        elif self.namespace:
            text = _("{kind}/{name} in {namespace} applied")
        elif self.dry_run:
            text = _("{kind}/{name} applied (server dry run, nothing stored)")
        else:
            text = _("{kind}/{name} applied")
        return text.format(kind=self.kind, name=self.name, namespace=self.namespace)


def check_library() -> str:
    """The installed kubernetes client's version; a clear error when it is older than this module needs."""
    import kubernetes

    version = getattr(kubernetes, "__version__", "0")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < MIN_KUBERNETES:
        raise WorkshopError(
            f"kubernetes {version} is too old for workshop.k8s.cluster: need >= {MIN_KUBERNETES} "
            f"(pip install -U 'kubernetes>={MIN_KUBERNETES}')"
        )
    return version


class Cluster:
    def __init__(self, api_client, *, where: str = "", version: str = "", user: str = ""):
        from kubernetes import client

        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.where, self.version, self.user = where, version, user
        self._dynamic = None
        self._cache_dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def dynamic(self):
        """The DynamicClient, made on first use (its discovery costs two requests); its discovery cache
        lives for this process only, so a CRD installed a minute ago is seen."""
        if self._dynamic is None:
            from kubernetes.dynamic import DynamicClient

            self._cache_dir = tempfile.TemporaryDirectory(prefix="workshop-discovery-")
            self._dynamic = self._call(
                lambda: DynamicClient(
                    self.api, cache_file=os.path.join(self._cache_dir.name, "discovery.json")
                ),
                "discover",
                "APIs",
            )
        return self._dynamic

    def _explain(
        self,
        exc,
        verb: str,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
    ) -> ClusterError:
        return explain(
            exc,
            verb,
            kind,
            name,
            namespace,
            host=self.api.configuration.host,
            user=self.user,
            where=self.where,
            namespace_missing=self._namespace_missing,
        )

    def _namespace_missing(self, namespace: str) -> bool:
        """Does the namespace itself not exist? (A get in a missing namespace answers 404 for the object.)"""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            self.core.read_namespace(namespace)
        except ApiException as exc:
            return exc.status == 404
        except HTTPError:
            return False
        return False

    def _call(self, fn, verb: str, kind: str, name: str | None = None, namespace: str | None = None):
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except (ApiException, HTTPError) as exc:
            raise self._explain(exc, verb, kind, name, namespace) from exc

    def resource(self, kind: str, api_version: str | None = None):
        """The discovered API resource of a kind; a missing CRD is named with what installs it."""
        from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError

        api_version = api_version or API_VERSIONS.get(kind)
        try:
            return self.dynamic.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            group = (api_version or "").rpartition("/")[0]
            resources = f"{plural(kind)}.{group}" if group else plural(kind)
            component = COMPONENTS.get(group)
            if component:
                raise ClusterError(
                    404,
                    f"{component} is not installed on this cluster: no {resources}"
                    + (f" ({api_version})" if api_version else ""),
                ) from None
            raise ClusterError(
                404,
                f"the cluster serves no {kind}"
                + (f" in {api_version}" if api_version else "")
                + " (is its CRD installed?)",
            ) from None
        except ResourceNotUniqueError:
            raise WorkshopError(
                f"kind {kind!r} is served by several API groups; give its apiVersion"
            ) from None

    # -- write
    def apply(
        self,
        docs: list[dict],
        dry_run: bool = False,
        field_manager: str = "workshop",
        *,
        namespace: str = "default",
        force: bool = False,
        validate: bool = True,
        karpenter: str | None = None,
        trainer: str | None = None,
    ) -> list[Applied]:
        """Server-side apply each document (what `kubectl apply --server-side` does), validated offline first
        against the CRD release each targets, or the releases given (so mistakes fail before any call)."""
        if validate:
            ensure_valid(
                [d for d in docs if d.get("kind") in KIND_FAMILY], karpenter=karpenter, trainer=trainer
            )
        if not field_manager or len(field_manager) > 128:
            raise WorkshopError(f"field manager {field_manager!r} must be 1-128 characters")
        results: list[Applied] = []
        for i, doc in enumerate(docs, 1):
            try:
                results.append(self._apply_one(doc, dry_run, field_manager, namespace, force))
            except ClusterError as exc:
                if not results:
                    raise
                done = ", ".join(f"{r.kind}/{r.name}" for r in results)
                raise ClusterError(
                    exc.status,
                    f"document {i} of {len(docs)} failed: {exc}. Documents 1-{i - 1} went through "
                    f"({done}{', dry run' if dry_run else ''}; nothing is rolled back); "
                    f"{len(docs) - i} after it not sent",
                    missing_namespace=exc.missing_namespace,
                ) from exc
        return results

    def _apply_one(
        self, doc: dict, dry_run: bool, field_manager: str, namespace: str, force: bool
    ) -> Applied:
        if doc.get("kind") == "Namespace" and field_manager == "workshop":  # teardown recognises it by both
            meta = doc.get("metadata") or {}
            doc = {**doc, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), **workbook_labels()}}}
        meta = doc.get("metadata") or {}
        res = self.resource(doc["kind"], doc.get("apiVersion"))
        ns = (meta.get("namespace") or namespace) if res.namespaced else None
        kwargs = {
            "body": doc,
            "name": meta.get("name"),
            "namespace": ns,
            "field_manager": field_manager,
            "force_conflicts": True if force else None,
            **({"dry_run": "All"} if dry_run else {}),
        }
        out = self._call(
            lambda res=res, kwargs=kwargs: self.dynamic.server_side_apply(res, **kwargs),
            "apply",
            doc["kind"],
            meta.get("name"),
            ns,
        )
        uid = (out.to_dict().get("metadata") or {}).get("uid") if out is not None else None
        return Applied(doc["kind"], meta["name"], ns, dry_run, uid)

    def delete(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        missing_ok: bool = True,
        api_version: str | None = None,
    ) -> bool:
        """Delete one object; False when it was not there (and missing_ok)."""
        res = self.resource(kind, api_version)
        ns = (namespace or "default") if res.namespaced else None
        extra = {"dry_run": "All"} if dry_run else {}
        try:
            self._call(
                lambda: self.dynamic.delete(res, name=name, namespace=ns, **extra), "delete", kind, name, ns
            )
        except ClusterError as exc:
            if exc.status == 404 and missing_ok:
                return False
            raise
        return True

    # -- read
    def get(
        self,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        api_version: str | None = None,
        all_namespaces: bool = False,
    ) -> dict:
        """One object, or a list ({"items": [...], "metadata": {"resourceVersion": ...}}) without a name;
        `all_namespaces` lists a namespaced kind across every namespace (`kubectl get -A`)."""
        res = self.resource(kind, api_version)
        ns = (namespace or "default") if res.namespaced and not (all_namespaces and name is None) else None
        out = self._call(
            lambda: res.get(name=name, namespace=ns, label_selector=label_selector),
            "get" if name else "list",
            kind,
            name,
            ns,
        )
        return out.to_dict()

    def patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        patch: dict,
        *,
        field_manager: str = "workshop",
        api_version: str | None = None,
    ) -> dict:
        """A JSON merge patch (what `kubectl annotate` / `kubectl label` send): adds or changes the given keys
        only, so fields other managers own, and fields this manager applied, stay as they are."""
        res = self.resource(kind, api_version)
        ns = (namespace or "default") if res.namespaced else None
        out = self._call(
            lambda: self.dynamic.patch(
                res,
                body=patch,
                name=name,
                namespace=ns,
                content_type="application/merge-patch+json",
                field_manager=field_manager,
            ),
            "patch",
            kind,
            name,
            ns,
        )
        return out.to_dict()

    def pods(self, namespace: str = "default", *, label_selector: str | None = None) -> list[str]:
        """Names of the pods matching a selector (typed CoreV1Api)."""
        out = self._call(
            lambda: self.core.list_namespaced_pod(namespace, label_selector=label_selector),
            "list",
            "Pod",
            None,
            namespace,
        )
        return [p.metadata.name for p in out.items]

    def wait_for(
        self,
        kind: str,
        name: str,
        condition: str = "Ready",
        timeout: float = 600,
        *,
        namespace: str | None = None,
        interval: float = 5,
    ) -> bool:
        """Poll until status.conditions[type=condition] is True; False on timeout (never hangs)."""
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                obj = self.get(kind, name, namespace)
                if conditions(obj).get(condition) == "True":
                    return True
            except ClusterError as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() + interval > deadline:
                return False
            time.sleep(interval)

    def watch(
        self,
        kind: str,
        *,
        timeout: float = 300,
        namespace: str | None = None,
        label_selector: str | None = None,
        api_version: str | None = None,
    ) -> Iterator[tuple[str, dict]]:
        """(event type, object) pairs for `timeout` seconds, as an informer sees them: a list first (each
        object as ADDED), then a watch from its resourceVersion. A cut stream resumes from the last version
        seen; 410 Gone (that version was compacted away) lists again."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        check_positive("timeout", timeout)
        res = self.resource(kind, api_version)
        ns = (namespace or "default") if res.namespaced else None
        deadline = time.monotonic() + timeout
        version = None
        while (left := deadline - time.monotonic()) > 0:
            if version is None:
                listing = self.get(kind, namespace=ns, label_selector=label_selector, api_version=api_version)
                for item in listing.get("items") or []:
                    yield "ADDED", item
                version = (listing.get("metadata") or {}).get("resourceVersion") or "0"
                continue
            stream = watch.Watch().stream(
                res.get,
                namespace=ns,
                label_selector=label_selector,
                resource_version=version,
                allow_watch_bookmarks=True,
                serialize=False,
                timeout_seconds=max(1, int(left)),
                _request_timeout=(10, left + 10),
            )
            try:
                for event in stream:
                    obj = event.get("raw_object") or event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") != "BOOKMARK":
                        yield event.get("type", ""), obj
                    if time.monotonic() > deadline:
                        return
            except ApiException as exc:
                if exc.status != 410:
                    raise self._explain(exc, "watch", kind, None, ns) from exc
                version = None  # too old: list again
            except HTTPError:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))  # cut: resume from `version`

    def watch_nodeclaims(self, *, timeout: float = 600, nodepool: str | None = None) -> Iterator[str]:
        """One readable line (str) per NodeClaim change: which instance type, which node, which conditions;
        for at most `timeout` seconds."""
        selector = f"karpenter.sh/nodepool={nodepool}" if nodepool else None
        for kind, obj in self.watch("NodeClaim", timeout=timeout, label_selector=selector):
            meta, status = obj.get("metadata") or {}, obj.get("status") or {}
            labels = meta.get("labels") or {}
            ready = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
            yield (
                f"{kind:8} nodeclaim/{meta.get('name')} "
                f"type={labels.get('node.kubernetes.io/instance-type', '?')}"
                f" node={status.get('nodeName', '-')} true={','.join(ready) or '-'}"
            )

    def watch_nodes(self, *, timeout: float = 600, label_selector: str | None = None) -> Iterator[str]:
        for kind, obj in self.watch("Node", timeout=timeout, label_selector=label_selector):
            meta = obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            conds = conditions(obj)
            taints = [t.get("key") for t in (obj.get("spec") or {}).get("taints") or []]
            yield (
                f"{kind:8} node/{meta.get('name')} type={labels.get('node.kubernetes.io/instance-type', '?')}"
                f" ready={conds.get('Ready', '?')} taints={','.join(taints) or '-'}"
            )

    def logs(
        self,
        pod: str,
        namespace: str = "default",
        *,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        timeout: float = 3600,
    ):
        """A pod's log (`kubectl logs`): the whole text, or with follow=True (`-f`) an iterator of lines as
        they are written."""
        from kubernetes import watch

        kwargs = {k: v for k, v in (("container", container), ("tail_lines", tail)) if v is not None}
        if not follow:
            text = self._call(
                lambda: self.core.read_namespaced_pod_log(pod, namespace, _request_timeout=timeout, **kwargs),
                "get logs of",
                "pods",
                pod,
                namespace,
            )
            return text or ""  # 204, no body: the pod is not scheduled yet

        return guarded(
            lambda: watch.Watch().stream(
                self.core.read_namespaced_pod_log,
                pod,
                namespace,
                follow=True,
                _request_timeout=(10, timeout),
                **kwargs,
            ),
            lambda exc: self._explain(exc, "get", "pods/log", pod, namespace),
        )


def conditions(obj: dict) -> dict[str, str]:
    """condition type -> status ('True'/'False'/'Unknown') of an object's status.conditions."""
    return {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}


def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float = 5.0,
    quiet: bool = False,
    required: bool = False,
) -> Cluster | None:
    """A Cluster when an API server answers; None (with one plain printed reason) otherwise, or, with
    `required`, a NoCluster error carrying that reason (for commands that cannot go on offline)."""
    check_library()
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    def say(text):
        if required:
            raise NoCluster(text)
        if not quiet:
            print(_("no cluster: {reason}; continuing offline").format(reason=text))

    cfg = client.Configuration()
    try:
        found = configure(cfg, kubeconfig, context)
    except NoCluster:
        raise
    except (config.ConfigException, WorkshopError) as exc:
        say(_("the kubeconfig could not be used ({error})").format(error=exc))
        return None
    if isinstance(found, str):
        say(_("no kubeconfig at {path} (and not running inside a pod)").format(path=found))
        return None
    where, user = found
    cfg.retries = retries()
    if not cfg.verify_ssl:  # insecure-skip-tls-verify: one line here, not a urllib3 warning per request
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    cluster = Cluster(client.ApiClient(cfg), where=where, user=user)
    try:
        info = client.VersionApi(cluster.api).get_code(_request_timeout=timeout)
    except (HTTPError, OSError) as exc:
        name = type(exc).__name__
        say(_("the API server at {host} did not answer ({error})").format(host=cfg.host, error=name))
        return None
    except ApiException as exc:
        say(cluster._explain(exc, "get", "version"))
        return None
    cluster.version = info.git_version or "?"
    if not quiet:
        _announce(cfg, cluster.version, where)
    return cluster


def _announce(cfg, version: str, where: str) -> None:
    """The connected line, and a note when the server's certificate is not verified."""
    print(
        _("connected: {host} (Kubernetes {version}, {where})").format(
            host=cfg.host, version=version, where=where
        )
    )
    if not cfg.verify_ssl:
        print(
            _("note: {host}'s TLS certificate is not verified (insecure-skip-tls-verify, {where})").format(
                host=cfg.host, where=where
            )
        )
