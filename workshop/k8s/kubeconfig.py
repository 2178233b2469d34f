"""Where a connection comes from: the in-cluster service account or a kubeconfig, each checked before the
kubernetes client reads it (a damaged kubeconfig is one error naming its path, not a traceback)."""

from __future__ import annotations

import os
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.k8s.base import read_yaml_docs


def configure(cfg, kubeconfig: str | None, context: str | None) -> tuple[str, str] | str:
    """Load the in-cluster service account or the kubeconfig into `cfg`: (where, user), or the kubeconfig
    path when there is none."""
    from kubernetes import config

    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
        return "in-cluster service account", "the pod's service account"
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    if not Path(os.path.expanduser(path)).is_file():
        return path
    path = os.path.expanduser(path)
    check_kubeconfig(path)
    config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    contexts, active = config.list_kube_config_contexts(config_file=path)
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    user = ((chosen or {}).get("context") or {}).get("user", "")
    return f"kubeconfig {path}" + (f" context {context}" if context else ""), user


def check_kubeconfig(path, what: str = "kubeconfig") -> None:
    """A kubeconfig must be one YAML mapping: anything else (a folder, binary, not YAML, a list) is a
    WorkshopError naming the path, before the kubernetes client fails on it with a traceback."""

    docs = read_yaml_docs(path, what, "a kubeconfig: one YAML mapping")
    if len(docs) != 1:
        raise WorkshopError(f"{what} {str(path)!r} holds {len(docs)} YAML documents; expected one mapping")
