"""The launch ledger: each launch a line (module, ranks, wall and CPU seconds, start-up and first step),
written only when WORKSHOP_LAUNCH_LOG names a file, and added up per chapter."""

from __future__ import annotations

import sys

from workshop.launch import ledger
from workshop.launch.procs import run_captured

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"


def test_what_names_the_module_and_the_ranks_of_a_command_line():
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        "--tee=3",
        "--standalone",
    ]
    assert ledger.what([*torchrun, "-m", "workshop.train", "--model", "tiny"]) == ("workshop.train", 2)
    assert ledger.what([sys.executable, "-m", "workshop.experiments.ceiling", "--child", "{}"]) == (
        "workshop.experiments.ceiling",
        1,
    )
    assert ledger.what([sys.executable, "-c", "pass"]) == ("python -c", 1)


def test_nothing_is_written_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(ledger.LEDGER_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    ledger.record([sys.executable, "-c", "pass"], 1.0, 0.5)
    assert list(tmp_path.iterdir()) == []


def test_a_captured_launch_is_a_line_with_its_children_cpu_seconds(tmp_path, monkeypatch):
    """run_captured's child spins 0.4 s of CPU: the line counts it (the child's, not this process's)."""
    log = tmp_path / "launches.jsonl"
    monkeypatch.setenv(ledger.LEDGER_ENV, str(log))
    run_captured([sys.executable, "-c", SPIN], timeout=60)
    (line,) = ledger.read(log)
    assert line["module"] == "python -c" and line["ranks"] == 1 and line["exit"] == 0
    assert 0.4 <= line["cpu_s"] < 5 and line["seconds"] >= line["cpu_s"] * 0.5


def test_a_training_launch_splits_start_up_first_step_and_steady_steps(tmp_path, monkeypatch):
    log = tmp_path / "launches.jsonl"
    monkeypatch.setenv(ledger.LEDGER_ENV, str(log))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "-m", "workshop.train"]
    steps = [
        {"step": 1, "step_time_s": 30.0},
        {"step": 2, "step_time_s": 0.5},
        {"step": 3, "step_time_s": 0.7},
    ]
    ledger.record(cmd, 45.0, 80.0, steps, first_arrived_s=38.0, exit=0)
    ledger.record([sys.executable, "-m", "workshop.experiments.ceiling"], 3.0, 5.0, ranks=2)
    first, probe = ledger.read(log)
    assert first == {
        "module": "workshop.train",
        "ranks": 2,
        "seconds": 45.0,
        "cpu_s": 80.0,
        "steps": 3,
        "first_step_s": 30.0,
        "steady_step_s": 0.6,
        "start_s": 8.0,
        "exit": 0,
    }
    assert probe["ranks"] == 2 and "steps" not in probe
    assert ledger.summary([first, probe]) == {
        "launches": 2,
        "ranks": 4,
        "steps": 3,
        "seconds": 48.0,
        "cpu_s": 85.0,
        "start_s": 8.0,
        "first_step_s": 30.0,
    }
    assert ledger.read(tmp_path / "none.jsonl") == []
