"""Shared fixtures. Heavy runs are marked `slow`; CI runs them too (see .ci/run)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from workshop.paths import REPO

# No test may reach a real cluster: every test (and every notebook or subprocess it starts) sees a kubeconfig
# whose only server is a closed loopback port, and no in-cluster service account. Set at import time, before
# any test module or kubernetes client reads the environment.
NOWHERE_KUBECONFIG = Path(tempfile.mkdtemp(prefix="workshop-kube-")) / "config"
atexit.register(shutil.rmtree, NOWHERE_KUBECONFIG.parent, ignore_errors=True)  # leave /tmp as we found it
NOWHERE_KUBECONFIG.write_text("""apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: nobody
  user: {token: not-a-token}
contexts:
- name: nowhere
  context: {cluster: nowhere, user: nobody}
current-context: nowhere
""")
os.environ["KUBECONFIG"] = str(NOWHERE_KUBECONFIG)
for _var in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
    os.environ.pop(_var, None)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def kit_cache(tmp_path_factory) -> Path:
    """One corpus + tokenizer cache for the whole test session (building it takes a few seconds)."""
    path = Path(os.environ.get("WORKSHOP_TEST_CACHE", tmp_path_factory.mktemp("kit")))
    from workshop.train.data import local_kit

    local_kit(path)
    return path


@pytest.fixture(scope="session", autouse=True)
def no_leftover_deepspeed_shm():
    """Safety net: DeepSpeed never unlinks its ~66 MB-per-rank /dev/shm buffers. The entry point and the
    launcher release them, but runs that fail on purpose (chapter 03's pitfalls) cannot; /dev/shm is RAM,
    so the test session removes what it left behind: the new buffers no live process holds. A buffer some
    process still holds belongs to a run going on beside this session (another test session, a workbook
    run): unlinking it would leave that run's peers waiting forever for its name."""
    from workshop.train.shm import SHM_DIR, SHM_GLOB, release_orphaned_buffers

    before = set(SHM_DIR.glob(SHM_GLOB))
    yield
    release_orphaned_buffers(set(SHM_DIR.glob(SHM_GLOB)) - before)
