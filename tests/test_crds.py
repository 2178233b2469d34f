"""The CRD cache: downloads checked by digest (from a loopback server standing in for the upstream tags),
imports from a folder, a second run served from the cache, and plain errors when nothing is there."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import crds

REPO = Path(__file__).resolve().parent.parent


def _source() -> Path:
    """A folder holding the pinned files (CI imports them from outside the project); skip if there is none."""
    for candidate in (os.environ.get("WORKSHOP_CRDS_DIR"), crds.cache_dir()):
        if candidate and all(not crds.missing(r, Path(candidate)) for r in crds.RELEASES):
            return Path(candidate)
    pytest.skip("no complete CRD folder here: run `workshop crds fetch` or `workshop crds import DIR` first")


@pytest.fixture
def source() -> Path:
    return _source()


@pytest.fixture
def upstream(tmp_path, source):
    """A loopback HTTP server laid out like the upstream repositories at their tags; counts requests."""
    src = source
    site = tmp_path / "site"
    for rel in crds.RELEASES:
        for name, upstream_path, _ in rel.files:
            dest = site / rel.repo / rel.tag / upstream_path
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / rel.folder / name, dest)
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(site), **kw)

        def log_message(self, *a):
            hits.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", site, hits
    server.shutdown()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WORKSHOP_CRDS_DIR", raising=False)
    return tmp_path / "cache" / "workshop" / "crds"


def test_fetch_verifies_digests_and_a_second_run_is_served_from_the_cache(upstream, empty_cache):
    base, _, hits = upstream
    written = crds.fetch(base_url=base, quiet=True)
    assert len(written) == sum(len(r.files) for r in crds.RELEASES) == 14
    assert all(not crds.missing(r) for r in crds.RELEASES)
    assert crds.root() == empty_cache
    first = len(hits)
    assert crds.fetch(base_url=base, quiet=True) == [] and len(hits) == first  # nothing downloaded again
    from workshop.k8s.validate import load_crds

    assert set(load_crds("trainer", "2.3.0")) == {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}


def test_a_tampered_file_is_refused_and_nothing_is_written(upstream, empty_cache):
    base, site, _ = upstream
    rel = crds.release("karpenter", "1.8.8")
    name, path, _ = rel.files[0]
    target = site / rel.repo / rel.tag / path
    target.write_text(target.read_text().replace("maxLength: 63", "maxLength: 64", 1))
    with pytest.raises(crds.CRDsMissing, match=r"does not match its pinned sha256.*refused, nothing written"):
        crds.fetch([rel], base_url=base, quiet=True)
    assert not (empty_cache / rel.folder / name).exists()


def test_first_use_fetches_on_its_own(upstream, empty_cache, monkeypatch):
    base, _, hits = upstream
    monkeypatch.setenv("WORKSHOP_CRDS_BASE_URL", base)
    folder = crds.folder("karpenter", "1.14.1")
    assert folder == empty_cache / "karpenter-aws-v1.14.1" and len(hits) == 3


def test_import_checks_digests(tmp_path, source, empty_cache):
    assert len(crds.import_dir(source)) == 14
    bad = tmp_path / "bad" / "kubeflow-trainer-v2.3.0"
    bad.mkdir(parents=True)
    (bad / "trainer.kubeflow.org_trainjobs.yaml").write_text("kind: Nope\n")
    with pytest.raises(WorkshopError, match=r"refused 1 file.*kubeflow-trainer-v2.3.0/trainer.kubeflow.org_trainjobs"):
        crds.import_dir(tmp_path / "bad")
    with pytest.raises(WorkshopError, match="no pinned CRD file found"):
        crds.import_dir(tmp_path)


def _offline_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "WORKSHOP_CRDS_DIR"}
    # an empty cache, and an "upstream" on a loopback port nobody listens on: offline, decided at once
    return {**env, "XDG_CACHE_HOME": str(tmp_path / "empty"), "WORKSHOP_CRDS_BASE_URL": "http://127.0.0.1:9"}


@pytest.mark.parametrize("command", [
    ["validate", "manifests/karpenter-cpu-amx.yaml"],
    ["render", "--check"],
    ["cluster", "apply", "manifests/karpenter-cpu-amx.yaml", "--dry-run"],
])
def test_offline_with_an_empty_cache_every_command_says_what_to_do(tmp_path, command):
    r = subprocess.run([sys.executable, "-m", "workshop", *command], cwd=REPO, capture_output=True, text=True,
                       env=_offline_env(tmp_path), timeout=300, check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "workshop crds fetch" in lines[0] and "workshop crds import DIR" in lines[0], lines


def test_or_skip_prints_the_reason(capsys):
    with crds.or_skip("chapter 02's validation"):
        raise crds.CRDsMissing("no CRD schemas for karpenter 1.8.8")
    assert capsys.readouterr().out.strip() == "chapter 02's validation skipped: no CRD schemas for karpenter 1.8.8"
