"""The cluster layer: connect, server-side apply, wait/watch, logs, delete — and a plain "no cluster" path.

Everything goes through the `kubernetes` client's ApiClient (auth, TLS, kubeconfig or in-cluster config)
with explicit REST paths, so what is sent is easy to read and to test: server-side apply is one PATCH
with `Content-Type: application/apply-patch+yaml`, `?fieldManager=workshop&force=true` and, for a dry
run, `&dryRun=All` (the API server validates and defaults the object but stores nothing).
Without a kubeconfig or a reachable API server, `connect()` prints why and returns None, so a notebook
keeps going offline and shows what it would have applied.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from workshop.errors import WorkshopError, check_choice, check_positive, report

# kind -> (apiVersion, plural, namespaced). Other kinds are found through API discovery.
RESOURCES = {
    "NodePool": ("karpenter.sh/v1", "nodepools", False),
    "NodeClaim": ("karpenter.sh/v1", "nodeclaims", False),
    "EC2NodeClass": ("karpenter.k8s.aws/v1", "ec2nodeclasses", False),
    "TrainJob": ("trainer.kubeflow.org/v1alpha1", "trainjobs", True),
    "TrainingRuntime": ("trainer.kubeflow.org/v1alpha1", "trainingruntimes", True),
    "ClusterTrainingRuntime": ("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", False),
    "Secret": ("v1", "secrets", True),
    "ConfigMap": ("v1", "configmaps", True),
    "Pod": ("v1", "pods", True),
    "Node": ("v1", "nodes", False),
    "Namespace": ("v1", "namespaces", False),
    "Event": ("v1", "events", True),
}


class ClusterError(WorkshopError):
    """The API server refused a request; carries the HTTP status and the server's message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"API server answered {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    namespace: str | None
    dry_run: bool
    uid: str | None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.kind}/{self.name}{where} applied" + (" (server dry run, nothing stored)" if self.dry_run else "")


class Cluster:
    def __init__(self, api_client, *, where: str = "", version: str = ""):
        self.api = api_client
        self.where, self.version = where, version
        self._discovered: dict[tuple[str, str], tuple[str, bool]] = {}

    # -- plumbing
    def request(self, method: str, path: str, *, query: dict | None = None, body=None,
                content_type: str | None = None, timeout: float = 30, stream: bool = False):
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        full = path + ("?" + urlencode(query) if query else "")
        method, url, headers, body, _ = self.api.param_serialize(
            method=method, resource_path=full, header_params=headers, body=body, auth_settings=["BearerToken"])
        resp = self.api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
        if stream and 200 <= resp.status < 300:
            return resp.response
        data = resp.read()
        if not 200 <= resp.status < 300:
            try:
                message = json.loads(data).get("message", "")
            except ValueError:
                message = data.decode(errors="replace")[:300]
            raise ClusterError(resp.status, message)
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            return data.decode(errors="replace")

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) for a kind: the table above, else API discovery."""
        known = RESOURCES.get(kind)
        if known and known[0] == api_version:
            return known[1], known[2]
        key = (api_version, kind)
        if key not in self._discovered:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for res in self.request("GET", prefix).get("resources", []):
                if res.get("kind") == kind and "/" not in res.get("name", ""):
                    self._discovered[key] = (res["name"], bool(res.get("namespaced")))
                    break
            else:
                raise WorkshopError(f"the cluster serves no {kind} in {api_version} (is its CRD installed?)")
        return self._discovered[key]

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            base += f"/namespaces/{namespace or 'default'}"
        return f"{base}/{plural}" + (f"/{name}" if name else "")

    def _path_for_kind(self, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        if kind not in RESOURCES:
            raise WorkshopError(f"unknown kind {kind!r} here; known: {', '.join(RESOURCES)}")
        return self.path(RESOURCES[kind][0], kind, name, namespace)

    # -- write
    def apply(self, docs: list[dict], dry_run: bool = False, field_manager: str = "workshop", *,
              namespace: str = "default", force: bool = True, validate: bool = True,
              karpenter: str = "1.8.8", trainer: str = "2.1.0") -> list[Applied]:
        """Server-side apply each document; validated offline first, against the CRD releases the cluster runs
        (so mistakes fail before any call)."""
        if validate:
            from workshop.k8s.validate import KIND_FAMILY, ensure_valid
            ensure_valid([d for d in docs if d.get("kind") in KIND_FAMILY], karpenter=karpenter, trainer=trainer)
        if not field_manager or len(field_manager) > 128:
            raise WorkshopError(f"field manager {field_manager!r} must be 1-128 characters")
        results = []
        for doc in docs:
            meta = doc.get("metadata") or {}
            _plural, namespaced = self.resource(doc["apiVersion"], doc["kind"])
            ns = (meta.get("namespace") or namespace) if namespaced else None
            query = {"fieldManager": field_manager, "force": "true" if force else "false"}
            if dry_run:
                query["dryRun"] = "All"
            out = self.request("PATCH", self.path(doc["apiVersion"], doc["kind"], meta["name"], ns),
                               query=query, body=json.dumps(doc), content_type="application/apply-patch+yaml")
            uid = (out.get("metadata") or {}).get("uid") if isinstance(out, dict) else None
            results.append(Applied(doc["kind"], meta["name"], ns, dry_run, uid))
        return results

    def delete(self, kind: str, name: str, namespace: str | None = None, *, dry_run: bool = False,
               missing_ok: bool = True) -> bool:
        """Delete one object; False when it was not there (and missing_ok)."""
        query = {"dryRun": "All"} if dry_run else None
        try:
            self.request("DELETE", self._path_for_kind(kind, name, namespace), query=query)
        except ClusterError as exc:
            if exc.status == 404 and missing_ok:
                return False
            raise
        return True

    # -- read
    def get(self, kind: str, name: str | None = None, namespace: str | None = None, *,
            label_selector: str | None = None):
        query = {"labelSelector": label_selector} if label_selector else None
        return self.request("GET", self._path_for_kind(kind, name, namespace), query=query)

    def wait_for(self, kind: str, name: str, condition: str = "Ready", timeout: float = 600, *,
                 namespace: str | None = None, interval: float = 5) -> bool:
        """Poll until status.conditions[type=condition] is True; False on timeout (never hangs)."""
        check_positive("timeout", timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                obj = self.get(kind, name, namespace)
                conds = (obj.get("status") or {}).get("conditions") or []
                if any(c.get("type") == condition and c.get("status") == "True" for c in conds):
                    return True
            except ClusterError as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() + interval > deadline:
                return False
            time.sleep(interval)

    def watch(self, kind: str, *, timeout: float = 300, namespace: str | None = None,
              label_selector: str | None = None) -> Iterator[tuple[str, dict]]:
        """(event type, object) pairs until `timeout` seconds pass; the server closes the stream then."""
        check_positive("timeout", timeout)
        query = {"watch": "true", "timeoutSeconds": str(int(timeout))}
        if label_selector:
            query["labelSelector"] = label_selector
        resp = self.request("GET", self._path_for_kind(kind, None, namespace), query=query,
                            timeout=timeout + 10, stream=True)
        deadline = time.monotonic() + timeout
        try:
            for line in resp:
                if line.strip():
                    event = json.loads(line)
                    yield event.get("type", ""), event.get("object") or {}
                if time.monotonic() > deadline:
                    break
        finally:
            resp.release_conn()

    def watch_nodeclaims(self, *, timeout: float = 600, nodepool: str | None = None) -> Iterator[str]:
        """One readable line per NodeClaim change: which instance type, which node, which conditions."""
        selector = f"karpenter.sh/nodepool={nodepool}" if nodepool else None
        for kind, obj in self.watch("NodeClaim", timeout=timeout, label_selector=selector):
            meta, status = obj.get("metadata") or {}, obj.get("status") or {}
            labels = meta.get("labels") or {}
            ready = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
            yield (f"{kind:8} nodeclaim/{meta.get('name')} type={labels.get('node.kubernetes.io/instance-type', '?')}"
                   f" node={status.get('nodeName', '-')} true={','.join(ready) or '-'}")

    def watch_nodes(self, *, timeout: float = 600, label_selector: str | None = None) -> Iterator[str]:
        for kind, obj in self.watch("Node", timeout=timeout, label_selector=label_selector):
            meta = obj.get("metadata") or {}
            labels = meta.get("labels") or {}
            conds = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
            taints = [t.get("key") for t in (obj.get("spec") or {}).get("taints") or []]
            yield (f"{kind:8} node/{meta.get('name')} type={labels.get('node.kubernetes.io/instance-type', '?')}"
                   f" ready={conds.get('Ready', '?')} taints={','.join(taints) or '-'}")

    def logs(self, pod: str, namespace: str = "default", *, container: str | None = None,
             follow: bool = False, tail: int | None = None, timeout: float = 3600):
        """A pod's log: the whole text, or with follow=True an iterator of lines as they are written."""
        query = {"container": container, "follow": "true" if follow else None,
                 "tailLines": str(tail) if tail else None}
        query = {k: v for k, v in query.items() if v is not None}
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        if not follow:
            return self.request("GET", path, query=query or None, timeout=timeout)
        resp = self.request("GET", path, query=query, timeout=timeout, stream=True)

        def lines():
            try:
                for line in resp:
                    yield line.decode(errors="replace").rstrip("\n")
            finally:
                resp.release_conn()
        return lines()


def connect(*, kubeconfig: str | None = None, context: str | None = None, timeout: float = 5.0,
            quiet: bool = False) -> Cluster | None:
    """A Cluster when an API server answers; None (with one plain printed reason) otherwise."""
    from kubernetes import client, config

    def say(text):
        if not quiet:
            print(text)

    cfg = client.Configuration()
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
            where = "in-cluster service account"
        else:
            path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
            if not Path(os.path.expanduser(path)).is_file():
                say(f"no cluster: no kubeconfig at {path} (and not running inside a pod); continuing offline")
                return None
            config.load_kube_config(config_file=os.path.expanduser(path), context=context,
                                    client_configuration=cfg)
            where = f"kubeconfig {path}" + (f" context {context}" if context else "")
    except config.ConfigException as exc:
        say(f"no cluster: the kubeconfig could not be used ({exc}); continuing offline")
        return None
    cluster = Cluster(client.ApiClient(cfg), where=where)
    try:
        version = cluster.request("GET", "/version", timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any network failure means "no cluster", said plainly
        say(f"no cluster: the API server at {cfg.host} did not answer ({type(exc).__name__}); continuing offline")
        return None
    cluster.version = version.get("gitVersion", "?") if isinstance(version, dict) else "?"
    say(f"connected: {cfg.host} (Kubernetes {cluster.version}, {where})")
    return cluster


def main(argv: list[str] | None = None) -> int:
    from workshop.k8s.base import load_yaml_docs

    parser = argparse.ArgumentParser(prog="workshop cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("status", help="connect and print the server version")
    p_apply = sub.add_parser("apply", help="validate, then server-side apply YAML files")
    p_apply.add_argument("files", nargs="+")
    p_apply.add_argument("--dry-run", action="store_true", help="server-side dry run (nothing stored)")
    p_apply.add_argument("--field-manager", default="workshop")
    p_watch = sub.add_parser("watch", help="print NodeClaim or Node changes until the timeout")
    p_watch.add_argument("what", choices=["nodeclaims", "nodes"])
    p_watch.add_argument("--timeout", type=float, default=600)
    p_logs = sub.add_parser("logs", help="print (or follow) a pod's log")
    p_logs.add_argument("pod")
    p_logs.add_argument("-n", "--namespace", default="default")
    p_logs.add_argument("-f", "--follow", action="store_true")
    p_del = sub.add_parser("delete", help="delete the objects of YAML files")
    p_del.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    try:
        docs = []
        for f in getattr(args, "files", None) or []:
            if not Path(f).is_file():
                raise WorkshopError(f"manifest file {f!r} not found")
            docs += load_yaml_docs(Path(f).read_text())
        cluster = connect(kubeconfig=args.kubeconfig, context=args.context)
        if cluster is None:
            return 1
        if args.action == "apply":
            for result in cluster.apply(docs, dry_run=args.dry_run, field_manager=args.field_manager):
                print(result)
        elif args.action == "delete":
            for doc in docs:
                meta = doc.get("metadata") or {}
                gone = cluster.delete(doc["kind"], meta["name"], meta.get("namespace"))
                print(f"{doc['kind']}/{meta['name']} {'deleted' if gone else 'was not there'}")
        elif args.action == "watch":
            check_choice("watch target", args.what, ("nodeclaims", "nodes"))
            watcher = cluster.watch_nodeclaims if args.what == "nodeclaims" else cluster.watch_nodes
            for line in watcher(timeout=args.timeout):
                print(line, flush=True)
        elif args.action == "logs":
            out = cluster.logs(args.pod, args.namespace, follow=args.follow)
            for line in (out if args.follow else str(out).splitlines()):
                print(line, flush=True)
    except WorkshopError as exc:
        return report(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
