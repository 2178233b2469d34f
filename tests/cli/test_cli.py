"""The console entry points answer, and bad input fails early with the value and the allowed ones."""

import subprocess
import sys

import pytest

from workshop.cli import COMMANDS, main
from workshop.errors import WorkshopError
from workshop.launch.torchrun import check_fits, run_torchrun
from workshop.train import TrainArgs, parse_args
from workshop.train.deepspeed_config import ds_config


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


def test_module_help_works():
    r = run("-m", "workshop", "--help")
    assert r.returncode == 0 and all(name in r.stdout for name in COMMANDS)
    r = run("-m", "workshop.train", "--help")
    assert r.returncode == 0 and "--zero-stage" in r.stdout and "--offload-optimizer" in r.stdout


def test_unknown_command_names_the_allowed_ones(capsys):
    assert main(["trian"]) == 2
    err = capsys.readouterr().err
    assert "'trian'" in err and "train" in err


def test_train_cli_reports_error_without_traceback():
    r = run("-m", "workshop.train", "--model", "nope")
    assert (
        r.returncode == 2
        and r.stderr.startswith("error: unknown model 'nope'")
        and "Traceback" not in r.stderr
    )


def test_more_ranks_than_cores_is_refused(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with pytest.raises(WorkshopError, match=r"nproc_per_node=3 .* allowed: 1..2"):
        check_fits(3, 1)
    with pytest.raises(WorkshopError, match=r"2 ranks x 2 threads"):
        check_fits(2, 2)
    check_fits(2, 1)


def test_run_torchrun_validates_before_starting_anything(tmp_path):
    with pytest.raises(WorkshopError, match="unknown model"):
        run_torchrun(["--model", "nope", "--output-dir", str(tmp_path)], nproc_per_node=1, progress=False)
    assert not any(tmp_path.iterdir()), "nothing may be written for a refused run"


def test_argv_round_trip_and_ds_config():
    a = TrainArgs(
        model="small", zero_stage=3, offload_optimizer=True, offload_param=True, packing=False, threads=2
    )
    assert parse_args(a.to_argv()) == a
    cfg = ds_config(a)
    assert cfg["zero_optimization"]["offload_param"] == {"device": "cpu"}
    assert cfg["optimizer"]["type"] == "AdamW"  # ZeRO-Offload needs DeepSpeed's CPU Adam
    assert (
        "optimizer" not in ds_config(TrainArgs()) and ds_config(TrainArgs())["zero_allow_untested_optimizer"]
    )
