"""Chapter 05's section 7b: the plan file chapter 01 saved becomes validated manifests, or the learner is told
how to make one; a hand-edited file is refused before anything is written."""

import json

import pytest
import yaml

from workshop.book.your_plan import render_picked
from workshop.errors import WorkshopError
from workshop.plan.job import save_plan, stored_plan


def test_the_picked_plan_renders_into_validated_manifests(tmp_path):
    plan = stored_plan("gpu")
    path = save_plan(plan, tmp_path / "01_plan.json")
    said = render_picked(path, tmp_path / "rendered", trainer="2.3.0")
    written = sorted(p.name for p in (tmp_path / "rendered").iterdir())
    assert any(n.startswith("trainjob-") for n in written) and any(
        n.startswith("karpenter-") for n in written
    )
    assert f"cluster preflight --plan {path}" in said and plan.placement.label in said
    trainjob = next((tmp_path / "rendered").glob("trainjob-*.yaml"))
    docs = [d for d in yaml.safe_load_all(trainjob.read_text()) if d and d.get("kind") == "TrainJob"]
    assert docs and docs[0]["spec"]["trainer"]["numNodes"] == plan.placement.nodes


def test_no_plan_file_says_how_to_make_one(tmp_path):
    said = render_picked(tmp_path / "01_plan.json", tmp_path / "out")
    assert "workshop plan" in said and "--out" in said
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_hand_edited_plan_is_refused_and_nothing_is_written(tmp_path):
    path = save_plan(stored_plan("cpu"), tmp_path / "01_plan.json")
    data = json.loads(path.read_text())
    data["placement"]["nodes"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(WorkshopError, match="nodes"):
        render_picked(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()
