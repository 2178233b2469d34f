"""A small Kubernetes API server on 127.0.0.1 for the cluster tests: discovery, objects, server-side apply
(recorded in metadata.managedFields, as a real server does), JSON merge patches, lists filtered by
labelSelector, deletion (with hooks that play a controller's part, e.g. Karpenter removing a deleted pool's
NodeClaims), watch streams (scripted: cut mid-stream, 410 Gone), pod logs (followed, chunked), and injected
failures.

As a real server: an object with `metadata.finalizers` is not removed by a DELETE but marked Terminating
(`deletionTimestamp`) until its finalizers are gone (`finalize()` plays the controller that removes them); a
pod's log answers 204 with no body while the pod is not scheduled and 400 "waiting to start" while its
container is created (`log_script`); `forbidden` answers 403 per resource and verb. A new claim gets
`kubernetes.io/pvc-protection` (an admission plugin adds it), and, playing kube-controller-manager
(`pvc_protection_controller`), a deleted claim no pod mounts loses it at once. An apply into a namespace that
does not exist is 404 `namespaces "x" not found`; a string field given a number is the real server's 500
"failed to create typed patch object", every such field listed as the real one lists them (one:
`PATH: MESSAGE`; several: `errors:` then one indented `PATH: MESSAGE` line each).

It records every request so a test can assert what the client sent. Only what the workbook's client calls is
served; anything else is a 404 Status, as a real server would answer."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# group/version -> [(plural, kind, namespaced)]
GROUPS = {
    "v1": [
        ("pods", "Pod", True),
        ("pods/log", "Pod", True),
        ("secrets", "Secret", True),
        ("nodes", "Node", False),
        ("namespaces", "Namespace", False),
        ("persistentvolumeclaims", "PersistentVolumeClaim", True),
        ("persistentvolumes", "PersistentVolume", False),
    ],
    "storage.k8s.io/v1": [("storageclasses", "StorageClass", False)],
    "karpenter.sh/v1": [("nodepools", "NodePool", False), ("nodeclaims", "NodeClaim", False)],
    "karpenter.k8s.aws/v1": [("ec2nodeclasses", "EC2NodeClass", False)],
    "trainer.kubeflow.org/v1alpha1": [
        ("trainjobs", "TrainJob", True),
        ("clustertrainingruntimes", "ClusterTrainingRuntime", False),
    ],
}


def matches(selector: str | None, labels: dict) -> bool:
    """Does a label selector (`a=b,c!=d,e,!f,g in (x,y),h notin (z)`) select these labels?"""
    for term in re.split(r",(?![^(]*\))", selector or ""):
        term = term.strip()
        if not term:
            continue
        m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\((.*)\)", term)
        if m:
            values = {v.strip() for v in m.group(3).split(",")}
            if (labels.get(m.group(1)) in values) != (m.group(2) == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def managed_fields(manager: str, operation: str = "Apply", api_version: str = "v1") -> list[dict]:
    """A metadata.managedFields list naming one manager, as a real server records it."""
    return [
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": "2025-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {}},
        }
    ]


def status(code: int, message: str, reason: str = "", **details) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
        **({"details": details} if details else {}),
    }


class FakeAPIServer:
    def __init__(self, groups: dict | None = None):
        self.groups = dict(GROUPS if groups is None else groups)
        self.objects: dict[tuple, dict] = {}  # (group/version, plural, namespace, name) -> object
        for ns in ("default", "kube-system"):  # a real server always has these
            self.objects[("v1", "namespaces", None, ns)] = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "uid": "uid-" + ns, "resourceVersion": "1"},
            }
        self.requests: list[dict] = []
        self.faults: list[tuple] = []  # (method, path prefix, code, body, headers): answered once each
        self.watch_scripts: list[list] = []  # per watch request: events (dicts) and "cut" / "gone" / "close"
        self.conflicts: dict[str, list] = {}  # object name -> [(field, manager)] owned by another manager
        self.logs: dict[str, list[str]] = {}  # pod name -> lines
        self.on_delete: list[
            Callable[[tuple, dict], None]
        ] = []  # called with (key, object) after each DELETE
        # pod name -> answers to give before its log: "204" (not scheduled) or "waiting" (ContainerCreating)
        self.log_script: dict[str, list[str]] = {}
        self.forbidden: set[tuple[str, str]] = set()  # (verb: get/list/watch/patch/delete, plural): 403
        self.user = "alice"
        self.pvc_protection_controller = True  # kube-controller-manager releases claims no pod mounts
        self._rv = itertools.count(100)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def kubeconfig(self, path, token: str = "secret-token", user: str = "alice") -> str:
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "fake",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": user, "user": {"token": token}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": user}}],
                }
            )
        )
        return str(path)

    def put(self, gv: str, plural: str, obj: dict, namespace: str | None = None) -> dict:
        obj = {
            **obj,
            "metadata": {
                **obj.get("metadata", {}),
                "resourceVersion": str(next(self._rv)),
                "uid": "uid-" + obj["metadata"]["name"],
            },
        }
        self.objects[(gv, plural, namespace, obj["metadata"]["name"])] = obj
        return obj

    def finalize(self, gv: str, plural: str, name: str, namespace: str | None = None, finalizer=None) -> None:
        """Play a controller: drop one finalizer (all without `finalizer`); a Terminating object with none
        left is removed, as the real server does."""
        key = (gv, plural, namespace, name)
        obj = self.objects[key]
        held = obj["metadata"].get("finalizers") or []
        obj["metadata"]["finalizers"] = [f for f in held if finalizer is not None and f != finalizer]
        self._settle(key)

    def claim_in_use(self, namespace: str | None, claim: str) -> bool:
        """Does a pod (not finished) in the namespace mount the claim? (what pvc-protection waits for)"""
        for (gv, plural, ns, _), pod in list(self.objects.items()):
            if (gv, plural, ns) != ("v1", "pods", namespace):
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                if (volume.get("persistentVolumeClaim") or {}).get("claimName") == claim:
                    return True
        return False

    def _settle(self, key) -> bool:
        """Remove a Terminating object whose finalizers are all gone; True when it was removed."""
        obj = self.objects.get(key)
        meta = (obj or {}).get("metadata") or {}
        if obj is None or not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        gone = self.objects.pop(key)
        for hook in list(self.on_delete):
            hook(key, gone)
        return True

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ------------------------------------------------------------------------------------ handler
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body leave in two writes: without this, Nagle + the client's delayed ACK hold every
            # response ~40 ms (a real API server sets TCP_NODELAY too, as Go does by default)
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def send_json(self, code, obj, headers=None):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def start_stream(self, content_type="application/json"):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def chunk(self, data: bytes):
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def end_stream(self):
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def handle_any(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                server.requests.append(
                    {
                        "method": self.command,
                        "path": parts.path,
                        "query": query,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                for i, (method, prefix, code, obj, headers) in enumerate(server.faults):
                    if method == self.command and parts.path.startswith(prefix):
                        del server.faults[i]
                        return self.send_json(code, obj, headers)
                return self.route(parts.path.rstrip("/") or "/", query, body)

            do_GET = do_PATCH = do_DELETE = do_POST = handle_any  # noqa: N815 (http.server's names)

            def route(self, path, query, body):
                segs = path.strip("/").split("/")
                if path == "/version":
                    return self.send_json(
                        200,
                        {
                            "major": "1",
                            "minor": "33",
                            "gitVersion": "v1.33.0-fake",
                            "gitCommit": "0",
                            "gitTreeState": "clean",
                            "buildDate": "2025-01-01T00:00:00Z",
                            "goVersion": "go1.24",
                            "compiler": "gc",
                            "platform": "linux/amd64",
                        },
                    )
                if path == "/api":
                    return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"]})
                if path == "/apis":
                    groups = [
                        {
                            "name": gv.split("/")[0],
                            "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                            "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                        }
                        for gv in server.groups
                        if "/" in gv
                    ]
                    return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
                gv = "v1" if segs[0] == "api" else "/".join(segs[1:3])
                rest = segs[2:] if segs[0] == "api" else segs[3:]
                if gv not in server.groups:
                    return self.send_json(
                        404, status(404, "the server could not find the requested resource", "NotFound")
                    )
                if not rest:
                    resources = [
                        {
                            "name": p,
                            "singularName": "",
                            "namespaced": ns,
                            "kind": k,
                            "verbs": ["get", "list", "watch", "patch", "delete", "create"],
                        }
                        for p, k, ns in server.groups[gv]
                    ]
                    return self.send_json(
                        200, {"kind": "APIResourceList", "groupVersion": gv, "resources": resources}
                    )
                namespace = None
                if rest[0] == "namespaces" and len(rest) >= 3:
                    namespace, rest = rest[1], rest[2:]
                plural, name, sub = (
                    rest[0],
                    (rest[1] if len(rest) > 1 else None),
                    (rest[2] if len(rest) > 2 else None),
                )
                listing = "watch" if query.get("watch") else "list"
                verb = {"GET": "get" if name else listing, "PATCH": "patch", "DELETE": "delete"}.get(
                    self.command, "create"
                )
                if (verb, plural) in server.forbidden or ("*", plural) in server.forbidden:
                    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
                    return self.send_json(
                        403,
                        status(
                            403,
                            f'{plural} is forbidden: User "{server.user}" cannot {verb} resource "{plural}"'
                            f"{where}",
                            "Forbidden",
                        ),
                    )
                if sub == "log":
                    return self.pod_log(name, query)
                key = (gv, plural, namespace, name)
                if self.command == "PATCH":
                    if "merge-patch" in (self.headers.get("Content-Type") or ""):
                        return self.merge_patch(key, query, body)
                    return self.apply(key, query, body)
                if self.command == "DELETE":
                    if key not in server.objects:
                        return self.send_json(404, status(404, f'{plural} "{name}" not found', "NotFound"))
                    obj = server.objects[key]
                    if query.get("dryRun") == "All":
                        return self.send_json(200, obj)
                    if plural == "persistentvolumeclaims" and server.pvc_protection_controller:
                        if not server.claim_in_use(namespace, name):
                            held = obj["metadata"].get("finalizers") or []
                            obj["metadata"]["finalizers"] = [
                                f for f in held if f != "kubernetes.io/pvc-protection"
                            ]
                    if obj["metadata"].get("finalizers"):  # Terminating until a controller removes them
                        obj["metadata"].setdefault("deletionTimestamp", "2025-01-01T00:00:00Z")
                        obj["metadata"]["resourceVersion"] = str(next(server._rv))
                        return self.send_json(200, obj)
                    obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
                    server._settle(key)
                    return self.send_json(200, {"kind": "Status", "status": "Success"})
                if name:
                    if key not in server.objects:
                        return self.send_json(404, status(404, f'{plural} "{name}" not found', "NotFound"))
                    return self.send_json(200, server.objects[key])
                if query.get("watch") in ("true", "True", "1"):
                    return self.watch()
                items = [
                    o
                    for (g, p, ns, _), o in list(server.objects.items())
                    if g == gv
                    and p == plural
                    and (namespace is None or ns == namespace)
                    and matches(query.get("labelSelector"), (o.get("metadata") or {}).get("labels") or {})
                ]
                version = str(next(server._rv))
                server.requests[-1]["rv_answered"] = version
                return self.send_json(
                    200,
                    {
                        "kind": "List",
                        "apiVersion": gv,
                        "items": items,
                        "metadata": {"resourceVersion": version},
                    },
                )

            def apply(self, key, query, body):
                doc = json.loads(body)
                if key[2] is not None and ("v1", "namespaces", None, key[2]) not in server.objects:
                    return self.send_json(
                        404,
                        status(
                            404,
                            f'namespaces "{key[2]}" not found',
                            "NotFound",
                            name=key[2],
                            kind="namespaces",
                        ),
                    )
                trainer = (doc.get("spec") or {}).get("trainer") or {}
                wrong = [  # every mistyped field, as structured-merge-diff lists them
                    f".spec.trainer.{field}[{i}]: expected string, "
                    f"got &value.valueUnstructured{{Value:{value}}}"
                    for field in ("command", "args")
                    for i, value in enumerate(trainer.get(field) or [])
                    if not isinstance(value, str)
                ]
                if wrong:  # one: 'PATH: MESSAGE'; several: 'errors:' then '  PATH: MESSAGE' per line
                    detail = (
                        wrong[0] if len(wrong) == 1 else "\n".join(["errors:", *(f"  {w}" for w in wrong)])
                    )
                    return self.send_json(
                        500,
                        status(
                            500,
                            f"failed to create typed patch object ({key[2]}/{key[3]}; {key[0]}, "
                            f"Kind={doc.get('kind')}): {detail}",
                            "InternalError",
                        ),
                    )
                if key[1] == "persistentvolumeclaims" and key not in server.objects:
                    meta = doc.setdefault("metadata", {})
                    meta["finalizers"] = [*(meta.get("finalizers") or []), "kubernetes.io/pvc-protection"]
                owned = server.conflicts.get(key[3])
                if owned and query.get("force") not in ("true", "True"):
                    causes = [
                        {"type": "FieldManagerConflict", "field": f, "message": f'conflict with "{m}"'}
                        for f, m in owned
                    ]
                    return self.send_json(
                        409,
                        status(
                            409, f"Apply failed with {len(causes)} conflict(s)", "Conflict", causes=causes
                        ),
                    )
                manager = query.get("fieldManager") or ""
                old = server.objects.get(key) or {}
                old_meta = old.get("metadata") or {}
                kept = [
                    e
                    for e in old_meta.get("managedFields") or []
                    if (e.get("manager"), e.get("operation")) != (manager, "Apply")
                ]
                # what other managers set (labels, annotations, status) stays, as server-side apply keeps it
                meta = {
                    **old_meta,
                    **doc["metadata"],
                    **{
                        k: {**(old_meta.get(k) or {}), **(doc["metadata"].get(k) or {})}
                        for k in ("labels", "annotations")
                        if old_meta.get(k) or doc["metadata"].get(k)
                    },
                    "managedFields": kept + managed_fields(manager, "Apply", key[0]),
                }
                doc = {**doc, "metadata": meta}
                obj = {**doc, "metadata": {**doc["metadata"], "uid": "uid-" + key[3]}}
                if query.get("dryRun") != "All":
                    obj = server.put(key[0], key[1], {**old, **doc}, key[2])
                return self.send_json(200, obj)

            def merge_patch(self, key, query, body):
                """RFC 7386 JSON merge patch of a stored object (`kubectl annotate`, `kubectl label`)."""
                if key not in server.objects:
                    return self.send_json(404, status(404, f'{key[1]} "{key[3]}" not found', "NotFound"))

                def merge(target, patch):
                    if not isinstance(patch, dict):
                        return patch
                    out = dict(target) if isinstance(target, dict) else {}
                    for k, v in patch.items():
                        if v is None:
                            out.pop(k, None)
                        else:
                            out[k] = merge(out.get(k), v)
                    return out

                obj = merge(server.objects[key], json.loads(body))
                manager = query.get("fieldManager") or "unknown"
                entries = [
                    e
                    for e in obj["metadata"].get("managedFields") or []
                    if (e.get("manager"), e.get("operation")) != (manager, "Update")
                ]
                obj["metadata"]["managedFields"] = entries + managed_fields(manager, "Update", key[0])
                if query.get("dryRun") != "All":
                    obj = server.put(key[0], key[1], obj, key[2])
                    server._settle(key)
                return self.send_json(200, obj)

            def watch(self):
                script = server.watch_scripts.pop(0) if server.watch_scripts else ["hold"]
                if script and script[0] == "status410":
                    return self.send_json(410, status(410, "too old resource version", "Expired"))
                self.start_stream()
                for step in script:
                    if isinstance(step, dict):
                        self.chunk(json.dumps(step).encode() + b"\n")
                    elif step == "cut":  # the connection drops in the middle of a chunk
                        self.wfile.write(b'40\r\n{"type": "MODIFIED"')
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    elif step == "gone":
                        self.chunk(
                            json.dumps(
                                {
                                    "type": "ERROR",
                                    "object": status(410, "too old resource version: 1 (100)", "Expired"),
                                }
                            ).encode()
                            + b"\n"
                        )
                    elif step == "hold":
                        time.sleep(0.5)
                self.end_stream()

            def pod_log(self, pod, query):
                script = server.log_script.get(pod)
                if script:
                    step = script.pop(0)
                    if step == "204":  # not scheduled: the real server answers 204, no body
                        self.send_response(204)
                        self.end_headers()
                        return None
                    return self.send_json(
                        400,
                        status(
                            400,
                            f'container "node" in pod "{pod}" is waiting to start: ContainerCreating',
                            "BadRequest",
                        ),
                    )
                lines = server.logs.get(pod)
                if lines is None:
                    return self.send_json(404, status(404, f'pods "{pod}" not found', "NotFound"))
                if query.get("follow") not in ("true", "True"):
                    body = "".join(line + "\n" for line in lines).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    return self.wfile.write(body)
                self.start_stream("text/plain")
                for line in lines:  # written as the container prints them, one at a time
                    self.chunk(line.encode() + b"\n")
                    time.sleep(0.05)
                self.end_stream()

        return Handler
