"""The CRD schemas: the pinned releases ship with the package (a clone validates offline, nothing fetched),
every read is checked against the recorded digests, and other releases can be added into the user cache from a
loopback server standing in for the upstream tags, or from a folder."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import crds
from workshop.k8s import validate as v
from workshop.paths import REPO

POOL_FILE = REPO / "manifests" / "karpenter-cpu-amx.yaml"


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """An empty user cache, no override, and an 'upstream' nobody listens on (offline, decided at once)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("WORKSHOP_CRDS_DIR", raising=False)
    monkeypatch.setenv("WORKSHOP_CRDS_BASE_URL", "http://127.0.0.1:9")
    return tmp_path / "cache" / "workshop" / "crds"


@pytest.fixture
def upstream(tmp_path):
    """A loopback HTTP server laid out like the upstream repositories at their tags; counts requests. Besides
    the pinned releases it serves a 'Karpenter 1.9.0' (1.14.1's files) that the package does not ship."""
    site = tmp_path / "site"
    for rel in crds.RELEASES:
        for name, upstream_path, _ in rel.files:
            dest = site / rel.repo / rel.tag / upstream_path
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(crds.SHIPPED / rel.folder / name, dest)
    newest = crds.release("karpenter", "1.14.1")
    for name, upstream_path, _ in newest.files:
        dest = site / newest.repo / "v1.9.0" / upstream_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(crds.SHIPPED / newest.folder / name, dest)
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


def test_the_pinned_files_ship_with_the_package_byte_for_byte():
    for rel in crds.RELEASES:
        for name, _, digest in rel.files:
            assert hashlib.sha256((crds.SHIPPED / rel.folder / name).read_bytes()).hexdigest() == digest, name
    assert (crds.SHIPPED / "SOURCES.md").read_text() == crds.sources_markdown()  # `workshop crds sources`
    assert "Apache License" in (crds.SHIPPED / "LICENSE").read_text()
    shipped = {p.relative_to(crds.SHIPPED).as_posix() for p in crds.SHIPPED.rglob("*.yaml")}
    assert shipped == {f"{r.folder}/{n}" for r in crds.RELEASES for n, _, _ in r.files}  # nothing unrecorded


def test_the_package_data_declaration_covers_every_shipped_file():
    """pyproject's package-data globs must match the files, or a wheel install would validate nothing."""
    import fnmatch
    import tomllib

    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "workshop.k8s"
    ]
    base = crds.SHIPPED.parent
    for path in crds.SHIPPED.rglob("*"):
        if path.is_file():
            rel = path.relative_to(base).as_posix()
            assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs), rel


def test_an_empty_cache_offline_validates_from_the_package_and_writes_nothing(empty_cache):
    assert [crds.source(r) for r in crds.releases()] == ["package"] * 4
    assert crds.folder("karpenter", "1.8.8") == crds.SHIPPED / "karpenter-aws-v1.8.8"
    assert v.validate_files([POOL_FILE]) == []
    bad = v.validate_documents(
        [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "x"},
                "spec": {
                    "template": {
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "x",
                            },
                            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": []}],
                        }
                    }
                },
            }
        ]
    )
    assert bad and any(p.path == "spec.template.spec.requirements" for p in bad), bad  # the field is named
    assert not empty_cache.exists()


def test_an_altered_shipped_file_is_an_error_not_a_silent_fallback(tmp_path, monkeypatch, empty_cache):
    copy = tmp_path / "schemas"
    shutil.copytree(crds.SHIPPED, copy)
    target = copy / "karpenter-aws-v1.8.8" / "karpenter.sh_nodepools.yaml"
    target.write_text(target.read_text().replace("maxLength: 63", "maxLength: 64", 1))
    monkeypatch.setattr(crds, "SHIPPED", copy)
    with pytest.raises(
        crds.CRDsMissing,
        match=r"karpenter.sh_nodepools.yaml does not match the sha256 recorded "
        r"for Karpenter 1.8.8.*altered",
    ):
        crds.folder("karpenter", "1.8.8")


def test_adding_a_release_downloads_it_records_its_digests_and_validation_knows_it(upstream, empty_cache):
    base, _, hits = upstream
    assert "1.9.0" not in crds.versions("karpenter")
    written = crds.fetch([crds.new_release("karpenter", "1.9.0")], base_url=base)
    assert len(written) == 3 and len(hits) == 3
    assert crds.versions("karpenter") == ["1.8.8", "1.9.0", "1.14.1"]  # known from now on, in release order
    added = crds.release("karpenter", "1.9.0")
    assert not added.pinned and all(d for *_, d in added.files) and crds.source(added) == "cache"
    assert v.validate_files([POOL_FILE], karpenter="1.9.0") == []
    assert "1.9.0" in [x for verdict in v.judge_files([POOL_FILE]) for x in verdict.judged]
    # the recorded digests guard the cached copy from then on
    (empty_cache / added.folder / added.files[0][0]).write_text("kind: Nope\n")
    with pytest.raises(crds.CRDsMissing, match="does not match the sha256 recorded for Karpenter 1.9.0"):
        crds.folder("karpenter", "1.9.0")


def test_a_pinned_release_from_upstream_must_match_its_digest(upstream, empty_cache):
    base, site, _ = upstream
    rel = crds.release("karpenter", "1.8.8")
    _, path, _ = rel.files[0]
    target = site / rel.repo / rel.tag / path
    target.write_text(target.read_text().replace("maxLength: 63", "maxLength: 64", 1))
    with pytest.raises(crds.CRDsMissing, match=r"does not match its pinned sha256.*refused, nothing written"):
        crds.fetch([rel], base_url=base)
    assert not (empty_cache / rel.folder).exists()


def test_a_release_that_does_not_exist_upstream_is_named(upstream, empty_cache):
    base, _, _ = upstream
    with pytest.raises(crds.CRDsMissing, match=r"HTTP 404 \(is v7.7.7 a Karpenter release\?\)"):
        crds.fetch([crds.new_release("karpenter", "7.7.7")], base_url=base)
    assert "7.7.7" not in crds.versions("karpenter")
    with pytest.raises(WorkshopError, match=r"version 'latest' is not a release number such as 1.14.1"):
        crds.new_release("karpenter", "latest")


def test_import_checks_pinned_digests_and_records_added_releases(tmp_path, empty_cache):
    src = tmp_path / "src"
    shutil.copytree(crds.SHIPPED / "karpenter-aws-v1.14.1", src / "karpenter-aws-v1.10.0")
    shutil.copytree(crds.SHIPPED / "karpenter-aws-v1.8.8", src / "karpenter-aws-v1.8.8")
    assert len(crds.import_dir(src)) == 6
    assert "1.10.0" in crds.versions("karpenter")
    bad = tmp_path / "bad" / "kubeflow-trainer-v2.3.0"
    shutil.copytree(crds.SHIPPED / "kubeflow-trainer-v2.3.0", bad)
    (bad / "trainer.kubeflow.org_trainjobs.yaml").write_text("kind: Nope\n")
    with pytest.raises(
        WorkshopError, match=r"refused 1 file.*kubeflow-trainer-v2.3.0/trainer.kubeflow.org_trainjobs"
    ):
        crds.import_dir(tmp_path / "bad")
    junk = (
        tmp_path / "junk" / "karpenter-aws-v1.11.0"
    )  # an added release has no digest: it must at least be CRDs
    shutil.copytree(crds.SHIPPED / "karpenter-aws-v1.14.1", junk)
    (junk / "karpenter.sh_nodepools.yaml").write_bytes(b"\x00\xff binary")
    with pytest.raises(
        WorkshopError, match=r"refused 1 file.*karpenter-aws-v1.11.0/karpenter.sh_nodepools.yaml"
    ):
        crds.import_dir(tmp_path / "junk")
    assert "1.11.0" not in crds.versions("karpenter")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(WorkshopError, match="no complete release folder found"):
        crds.import_dir(tmp_path / "nothing")


def _cli(tmp_path, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "WORKSHOP_CRDS_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "empty"), WORKSHOP_CRDS_BASE_URL="http://127.0.0.1:9")
    return subprocess.run(
        [sys.executable, "-m", "workshop", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_offline_with_an_empty_cache_the_commands_validate(tmp_path):
    r = _cli(tmp_path, "validate", "manifests/karpenter-cpu-amx.yaml")
    assert r.returncode == 0 and "accepted by Karpenter 1.8.8, 1.14.1" in r.stdout, (r.stdout, r.stderr)
    r = _cli(tmp_path, "crds", "status")
    assert r.returncode == 0 and len([ln for ln in r.stdout.splitlines()[1:] if " package " in ln]) == 4, (
        r.stdout
    )
    assert not (tmp_path / "empty").exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["validate", "--trainer", "9.9.9", "manifests/trainjob-cpu-v2.1.yaml"],
            ["Kubeflow Trainer release '9.9.9' is unknown here", "known: 2.1.0, 2.3.0"],
        ),
        (["crds", "fetch"], ["--karpenter VERSION", "Karpenter 1.8.8, 1.14.1"]),
        (["crds", "fetch", "--trainer", "2.2.0"], ["could not download", "127.0.0.1:9"]),
    ],
)
def test_bad_crd_requests_get_one_line(tmp_path, args, words):
    r = _cli(tmp_path, *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
