"""manifests/ is generated: a fresh render must equal the checked-in files, and every entry validates."""

from __future__ import annotations

import functools

import pytest

from workshop.cli.manifests import render as render_command
from workshop.k8s import render
from workshop.k8s.base import HEADER, load_yaml_docs, to_yaml
from workshop.k8s.validate import validate_files
from workshop.paths import MANIFESTS_DIR


@pytest.fixture(scope="module", autouse=True)
def render_each_manifest_once():
    """A render sizes the jobs with the planner (tens of seconds for all six): this module's drift checks
    (render.drift, `render --check`, the write) compare against one render of each manifest."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(render, "render", functools.lru_cache(maxsize=None)(render.render))
        yield


def test_checked_in_manifests_have_no_drift():
    assert render.drift(MANIFESTS_DIR) == [], "run `workshop render` and commit manifests/"


def test_checked_in_manifests_validate_on_listed_releases():
    for name, entry in render.DEFAULT_MANIFESTS.items():
        if (
            not entry.crd_checked
        ):  # core kinds (StorageClass, PVC): checked by their typed spec (test_storage.py)
            assert {d["kind"] for d in load_yaml_docs((MANIFESTS_DIR / name).read_text())} <= {
                "StorageClass",
                "PersistentVolumeClaim",
            }
            continue
        for kv in entry.karpenter:
            for tv in entry.trainer:
                assert validate_files([MANIFESTS_DIR / name], karpenter=kv, trainer=tv) == []


def test_render_check_detects_drift(tmp_path, capsys):
    assert render_command(["--out", str(tmp_path)]) == 0
    assert render_command(["--out", str(tmp_path), "--check"]) == 0
    first = tmp_path / next(iter(render.DEFAULT_MANIFESTS))
    first.write_text(first.read_text().replace("720h", "719h"))
    assert render_command(["--out", str(tmp_path), "--check"]) == 1
    assert "drift:" in capsys.readouterr().out
    (tmp_path / first.name).unlink()
    assert render.drift(tmp_path) == [first.name]


def test_yaml_is_stable_and_round_trips():
    docs = [{"spec": {"b": 1, "a": None, "userData": "line1\nline2\n"}, "kind": "X", "apiVersion": "v1"}]
    text = to_yaml(docs)
    assert text.startswith(HEADER) and text == to_yaml(docs)
    assert text.index("apiVersion") < text.index("kind") < text.index("spec")
    assert "\n  a:" not in text and "userData: |" in text
    assert load_yaml_docs(text) == [
        {"apiVersion": "v1", "kind": "X", "spec": {"b": 1, "userData": "line1\nline2\n"}}
    ]


def test_unknown_manifest_name_is_an_error():
    import pytest

    from workshop.errors import WorkshopError

    with pytest.raises(WorkshopError, match="known: karpenter-cpu-amx.yaml"):
        render.render("nope.yaml")
