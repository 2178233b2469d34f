"""--model means one thing: preset (random weights), hub id (real weights) or a directory; errors in plain
words."""

from __future__ import annotations

import pytest

from workshop.errors import WorkshopError
from workshop.plan import models


def test_sources_are_told_apart(tmp_path):
    assert models.resolve_source("llama-3-8b") == models.ModelSource("preset", "llama-3-8b", "llama-3-8b")
    hub = models.resolve_source("meta-llama/Meta-Llama-3-8B")
    assert hub.kind == "hub" and hub.preset == "llama-3-8b" and hub.pretrained
    assert models.resolve_source(str(tmp_path)).kind == "local"
    assert "RANDOM weights" in models.resolve_source("llama-3-8b").describe()
    assert "meta-llama/Meta-Llama-3-8B" in models.resolve_source("llama-3-8b").describe()
    with pytest.raises(WorkshopError, match="unknown model 'no_such'.*preset.*meta-llama/Meta-Llama-3-8B"):
        models.resolve_source("no_such")


def test_recipe_follows_the_weights():
    ft = models.recipe("meta-llama/Meta-Llama-3-8B")
    assert (ft["lr"], ft["grad_accum"], ft["precision"], ft["dataset"], ft["packing"]) == (
        2e-5,
        4,
        "bf16",
        "wikitext",
        True,
    )
    assert models.recipe("tiny")["lr"] == 1e-3 and models.recipe("tiny")["dataset"] == "local"


def test_planner_takes_hub_ids():
    from workshop.plan.memory import architecture, plan_memory

    assert architecture("meta-llama/Meta-Llama-3-8B").params == architecture("llama-3-8b").params
    hub, preset = (
        plan_memory("meta-llama/Meta-Llama-3-8B", world_size=4),
        plan_memory("llama-3-8b", world_size=4),
    )
    assert hub.model == "meta-llama/Meta-Llama-3-8B" and {**vars(hub), "model": "llama-3-8b"} == vars(preset)
    with pytest.raises(WorkshopError, match="allowed: .*meta-llama/Meta-Llama-3-8B"):
        architecture("someone/else")


def test_gated_model_error_says_what_to_do(monkeypatch):
    try:  # the HTTP client huggingface_hub itself depends on: httpx2 from hub 2.x, httpx before
        import httpx2 as httpx
    except ImportError:
        import httpx
    from huggingface_hub.errors import GatedRepoError

    def gated(*a, **kw):
        req = httpx.Request(
            "GET", "https://huggingface.co/meta-llama/Meta-Llama-3-8B/resolve/main/config.json"
        )
        raise GatedRepoError("403 gated", response=httpx.Response(403, request=req))

    monkeypatch.setattr("huggingface_hub.hf_hub_download", gated)
    with pytest.raises(
        WorkshopError, match="gated model.*Accept the licence at https://huggingface.co/meta-llama"
    ):
        models.check_hub_access("meta-llama/Meta-Llama-3-8B", token="hf_x")
    with pytest.raises(WorkshopError, match="no token: set HF_TOKEN"):
        models.check_hub_access("meta-llama/Meta-Llama-3-8B", token=None)


def test_uncached_model_offline_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(WorkshopError, match="not in the hub cache.*hf download org/model"):
        models.check_hub_access("org/model")


def test_training_arguments_take_sources_and_refuse_bad_outputs(tmp_path):
    from workshop.train import parse_args

    assert parse_args(["--model", "meta-llama/Meta-Llama-3-8B"]).model == "meta-llama/Meta-Llama-3-8B"
    a = parse_args(["--save-model", "--save-total-limit", "2", "--sync-to", "s3://my-bucket/run"])
    assert (
        a.save_model
        and a.save_total_limit == 2
        and a.to_argv()[-5:] == ["--save-model", "--save-total-limit", "2", "--sync-to", "s3://my-bucket/run"]
    )
    with pytest.raises(WorkshopError, match="not an S3 URI"):
        parse_args(["--sync-to", "/fsx/out"])
    with pytest.raises(WorkshopError, match="save-total-limit"):
        parse_args(["--save-total-limit", "0"])


def test_zero3_saves_whole_16bit_weights():
    from workshop.train import TrainArgs
    from workshop.train.deepspeed_config import ds_config

    assert ds_config(TrainArgs())["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True
    assert "checkpoint" not in ds_config(TrainArgs())
    assert ds_config(TrainArgs(sync_to="s3://b-1/x"))["checkpoint"] == {"use_node_local_storage": True}
