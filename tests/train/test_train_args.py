"""--dist-timeout-min: the process group's collective timeout, from the command line to the group itself.

DeepSpeed's default is 10 minutes; the EKS fine-tune can wait longer than that in one collective (a hub
download on another node, the 16-bit gather at save, a checkpoint to FSx), so the jobs render 60. The real
2-rank run that reads it back from the group (and from the checkpoint's TrainingArguments) is
tests/train/test_train_run.py::test_two_rank_zero3_trains_and_partitions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from dataclasses import fields, replace
from datetime import timedelta

import pytest
import yaml

from workshop.cli import train as train_cli
from workshop.cli.train import build_parser
from workshop.errors import WorkshopError
from workshop.paths import REPO
from workshop.train import TrainArgs, ds_config, parse_args
from workshop.train import args as train_args
from workshop.train.args import DIST_TIMEOUT_MIN


def _value_after(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, argv
    return argv[argv.index(flag) + 1]


def test_default_is_deepspeeds_and_stays_off_the_command_line():
    assert TrainArgs().dist_timeout_min == DIST_TIMEOUT_MIN == 10
    assert "--dist-timeout-min" not in TrainArgs().to_argv()
    assert parse_args([]).dist_timeout_min == 10
    helps = {a.dest: a.help for a in build_parser()._actions}
    assert "DEEPSPEED_TIMEOUT" in helps["dist_timeout_min"] and "60" in helps["dist_timeout_min"]


@pytest.mark.parametrize("minutes", [60, 2.5, 0.5])
def test_flag_round_trips_through_to_argv(minutes):
    args = TrainArgs(dist_timeout_min=minutes)
    argv = args.to_argv()
    assert float(_value_after(argv, "--dist-timeout-min")) == minutes
    assert parse_args(argv) == args


@pytest.mark.parametrize(
    "value, needle",
    [
        ("0", "dist-timeout-min must be a number > 0, got 0.0"),
        ("-5", "dist-timeout-min must be a number > 0, got -5.0"),
        ("nan", "dist-timeout-min must be a number > 0, got nan"),
        ("inf", "dist-timeout-min inf is longer than a week"),
        ("20000", "dist-timeout-min 20000.0 is longer than a week; allowed: minutes > 0 and <= 10080"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(value, needle):
    with pytest.raises(WorkshopError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_args([f"--dist-timeout-min={value}"])


@pytest.mark.parametrize("value", ["soon", "10m", ""])
def test_non_numbers_are_refused_naming_the_flag(value, capsys):
    # the command reads the one grammar (train.args.from_argv): one `error:` line, exit 2
    assert train_cli.train([f"--dist-timeout-min={value}"]) == 2
    text = "".join(capsys.readouterr())
    assert "Traceback" not in text
    assert f"error: argument --dist-timeout-min: invalid float value: '{value}'" in text
    with pytest.raises(WorkshopError, match=f"argument --dist-timeout-min: invalid float value: '{value}'"):
        parse_args([f"--dist-timeout-min={value}"])  # a program's list: the same words, a WorkshopError


def test_a_programs_list_is_read_like_the_command_line():
    """launch/ and experiments/ read a list of flags without argparse (train.args.from_argv): the same
    spellings mean the same TrainArgs, and what argparse would refuse is refused by name."""
    argv = ["--no-packing", "--resume", "--seq-len=64", "--extra-ds", '{"overlap_comm": true}', "--lr", "0.5"]
    assert train_args.from_argv(argv) == TrainArgs(**vars(build_parser().parse_args(argv)))
    for bad, needle in [
        (["--warp", "9"], "unknown training argument '--warp'; allowed: --model, --dataset"),
        (["--seq-len"], "argument --seq-len: expected one argument"),
        (["--resume=yes"], "argument --resume: ignored explicit argument 'yes'"),
        (["--no-resume"], "unknown training argument '--no-resume'"),
        (["--extra-ds", "[1]"], "argument --extra-ds: expected a JSON object"),
    ]:
        with pytest.raises(WorkshopError, match=needle.replace("[", r"\[")):
            train_args.from_argv(bad)


# ------------------------------------------------------------------ one declaration: the fields are the flags
def _other_value(hint, default):
    """A value of the field's type that is not its default (no validation: the parser alone is under test)."""
    kind = train_args.field_kind(hint)
    if kind is bool:
        return not default
    if kind is dict:
        return {"overlap_comm": True}
    if kind is str:
        return f"{default}-x"
    return (default or 0) + (1 if kind is int else 0.5)


def test_every_field_is_a_flag_that_survives_to_argv():
    """The parser is derived from TrainArgs: a field added to it (or to the knobs it inherits) is a flag, in
    the command line's order, and a value other than its default travels through to_argv and back. A field
    the derivation cannot express fails here."""
    parser, hints = build_parser(), typing.get_type_hints(TrainArgs)
    flags = [a.dest for a in parser._actions if a.dest != "help"]
    assert flags == list(train_args.COMMAND_LINE)
    assert sorted(flags) == sorted(f.name for f in fields(TrainArgs))
    for f in fields(TrainArgs):
        args = replace(TrainArgs(), **{f.name: _other_value(hints[f.name], getattr(TrainArgs(), f.name))})
        assert TrainArgs(**vars(parser.parse_args(args.to_argv()))) == args, f.name
        assert train_args.from_argv(args.to_argv()) == args, f.name
    with pytest.raises(TypeError, match="no command-line form"):
        train_args.field_kind(list[str])


def test_switches_keep_their_spelling():
    helps = {a.dest: a for a in build_parser()._actions}
    assert helps["packing"].option_strings == ["--packing", "--no-packing"]
    assert helps["resume"].option_strings == ["--resume"] and helps["resume"].nargs == 0
    argv = TrainArgs(packing=False, resume=True).to_argv()
    assert "--no-packing" in argv and "--resume" in argv and "--packing" not in argv
    assert parse_args(["--extra-ds", '{"overlap_comm": true}']).extra_ds == {"overlap_comm": True}


def test_trainer_settings_need_no_process_group():
    """TrainingArguments' keywords come from one pure function; every key is one of its fields."""
    from transformers import TrainingArguments

    from workshop.train.trainer import MAX_GRAD_NORM, trainer_settings

    args = TrainArgs(engine="ddp", precision="bf16", dist_timeout_min=2.5, save_steps=4)
    s = trainer_settings(args, "gloo", None)
    assert set(s) <= set(TrainingArguments.__dataclass_fields__)
    assert s["use_cpu"] and s["ddp_backend"] == "gloo" and s["deepspeed"] is None and s["ddp_timeout"] == 150
    assert s["bf16"] and s["max_grad_norm"] == MAX_GRAD_NORM and s["save_strategy"] == "steps"
    masters = trainer_settings(replace(args, master_weights=True), "nccl", None)  # fp32 masters, no autocast
    assert not masters["bf16"] and masters["max_grad_norm"] == 0.0 and not masters["use_cpu"]
    ds = ds_config(TrainArgs())
    assert trainer_settings(TrainArgs(), "gloo", ds)["deepspeed"] is ds


# ------------------------------------------------------------------ the EKS TrainJobs
@pytest.mark.parametrize(
    "name", ["trainjob-cpu-v2.1.yaml", "trainjob-cpu-v2.2.yaml", "trainjob-gpu-v2.2.yaml"]
)
def test_rendered_eks_trainjobs_carry_the_longer_timeout(name):
    docs = yaml.safe_load_all((REPO / "manifests" / name).read_text())
    argv = next(d for d in docs if d and d["kind"] == "TrainJob")["spec"]["trainer"]["args"]
    assert _value_after(argv, "--dist-timeout-min") == "60"


def test_job_builders_set_it_and_an_override_wins():
    from workshop.k8s import planned_job
    from workshop.k8s import trainjob as tj

    assert tj.JOB_SETTINGS["dist_timeout_min"] == 60
    for spec in (planned_job.default_cpu_job(), planned_job.default_gpu_job()):
        assert _value_after(spec.train_args, "--dist-timeout-min") == "60"
    assert _value_after(tj.train_args(dist_timeout_min=90), "--dist-timeout-min") == "90"
    with pytest.raises(WorkshopError, match="dist-timeout-min must be a number > 0, got 0"):
        tj.train_args(dist_timeout_min=0)


# ------------------------------------------------------------------ into the process group
def test_deepspeed_init_gets_the_timeout(monkeypatch):
    """The DeepSpeed engine's group: init_distributed hands DeepSpeed a timedelta (its own default would be
    10 minutes or $DEEPSPEED_TIMEOUT). Recorded, not started: the real group is the slow test's."""
    deepspeed = pytest.importorskip("deepspeed")
    from workshop.train import distributed, dsprobe

    seen = {}
    monkeypatch.setattr(deepspeed, "init_distributed", lambda **kw: seen.update(kw))
    monkeypatch.setattr(dsprobe, "probe_deepspeed_ops", dict)
    monkeypatch.setattr(dsprobe, "use_versioned_extensions_dir", lambda: None)
    distributed.init_distributed(TrainArgs(dist_timeout_min=45), "gloo")
    assert seen == {"dist_backend": "gloo", "timeout": timedelta(minutes=45)}


ONE_RANK = """
import json, sys
import torch.distributed as dist
from workshop.train import TrainArgs
from workshop.train.distributed import ensure_process_env, init_distributed, pg_timeout
ensure_process_env()
init_distributed(TrainArgs(engine="ddp", dist_timeout_min=float(sys.argv[1])), "gloo")
print(json.dumps(pg_timeout().total_seconds()))
dist.destroy_process_group()
"""


def test_ddp_group_really_has_the_timeout():
    """A one-rank gloo group in a fresh process (a plain run, as a notebook starts one): the group's backend
    options report the timeout asked for, not torch's 30-minute gloo default."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    r = subprocess.run(
        [sys.executable, "-c", ONE_RANK, "2.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == 150.0
