"""The launcher reads the failing rank's own error out of torchrun's output (canned logs), and stops every
process it started when a run times out."""

import pytest

from workshop.errors import WorkshopError
from workshop.launch.torchrun import last_lines_per_rank, rank_failure

ROOT = """[default0]:METRIC {{"step": 1}}
[default1]:boom
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_21:23:25
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 950)
  error_file: {error_file}
  traceback : {traceback}
============================================================
"""
TB = """Traceback (most recent call last):
    File "/x/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper
      return f(*args, **kwargs)
    File "/repo/workshop/train.py", line 649, in main
      train(args)
    File "/repo/workshop/loading/worker.py", line 10, in run
      raise KeyError("lm_head.weight")
  KeyError: 'lm_head.weight'"""


def test_a_raised_exception_names_rank_type_message_and_project_frames():
    text = rank_failure(ROOT.format(code=1, error_file="/tmp/e.json", traceback=TB), 1)
    assert text.splitlines()[0] == "rank 1 failed (exit 1): KeyError: 'lm_head.weight'"
    assert text.splitlines()[1:] == [
        '  at File "/repo/workshop/train.py", line 649, in main',
        '  at File "/repo/workshop/loading/worker.py", line 10, in run',
    ]


def test_bad_input_shows_the_ranks_error_line():
    log = "[default1]:error: seq-len must be a number > 0, got -1\n" + ROOT.format(
        code=2,
        error_file="<N/A>",
        traceback="To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    )
    assert rank_failure(log, 1) == "rank 1 failed (exit 2): error: seq-len must be a number > 0, got -1"


def test_a_killed_rank_is_named_with_its_signal():
    log = ROOT.format(code=-9, error_file="<N/A>", traceback="To enable traceback see: https://x")
    assert rank_failure(log, 1) == "rank 1 failed (exit -9): killed by SIGKILL"


def test_last_line_of_each_rank():
    lines = ["[default0]:a\n", "[default1]:b\n", "[default0]:c\n", "[default1]:  \n", "torchrun says\n"]
    assert last_lines_per_rank(lines) == {"rank 0": "c", "rank 1": "b"}


def test_a_timed_out_launcher_takes_its_ranks_with_it(tmp_path):
    """Like torchrun, this launcher starts its 'rank' in a session of its own; a timeout must stop both."""
    import subprocess
    import sys

    import psutil

    from workshop.launch.procs import run_captured

    marker = tmp_path / "rank-alive"
    rank = f"import time, pathlib; pathlib.Path({str(marker)!r}).touch(); time.sleep(600)"
    launcher = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {rank!r}], "
        "start_new_session=True); time.sleep(600)"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_captured([sys.executable, "-c", launcher], timeout=3)
    assert marker.exists()  # the rank did start
    left = [
        p.pid for p in psutil.process_iter(["cmdline"]) if str(marker) in " ".join(p.info["cmdline"] or [])
    ]
    assert not left, f"rank processes left running: {left}"


def test_allocator_env_preloads_the_named_allocator_or_says_how_to_install_it(monkeypatch):
    from workshop.launch import allocator as launch

    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert launch.allocator_env("system") == ({}, "system")
    monkeypatch.setattr(launch, "allocator_path", lambda name: None)
    assert launch.allocator_env("auto") == ({}, "system")  # nothing installed: glibc, and the run goes on
    with pytest.raises(
        WorkshopError,
        match=r"allocator tcmalloc is not installed \(apt-get install "
        r"libtcmalloc-minimal4\); allowed here: system, auto",
    ):
        launch.allocator_env("tcmalloc")
    with pytest.raises(
        WorkshopError, match="unknown allocator 'hoard'; allowed: system, auto, tcmalloc, jemalloc"
    ):
        launch.allocator_env("hoard")
    monkeypatch.setattr(launch, "allocator_path", lambda name: f"/usr/lib/lib{name}.so")
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    env, chosen = launch.allocator_env("auto")
    assert chosen == "tcmalloc" and env == {"LD_PRELOAD": "/usr/lib/libtcmalloc.so:/opt/other.so"}
    env, chosen = launch.allocator_env("jemalloc")
    assert (
        env["LD_PRELOAD"].startswith("/usr/lib/libjemalloc.so")
        and "background_thread:true" in env["MALLOC_CONF"]
    )


def test_a_run_is_hung_past_its_timeout_or_past_its_step_timeout():
    """The total limit counts from the start; the step limit only from a step to the next, so neither a slow
    start nor saving the model after the last step is a hang by it (the real stop of a hung 2-rank run:
    tests/train/test_train_run.py; bad limits: tests/launch/test_refusals.py)."""
    import time

    from workshop.launch.torchrun import _Limits

    now = time.monotonic()
    assert _Limits().exceeded(now - 1e6, now - 1e6, 3) is None
    assert _Limits(timeout=60).exceeded(now - 30, None, 0) is None
    assert _Limits(timeout=60).exceeded(now - 61, None, 0) == "run stopped after 60 s without finishing"
    step = _Limits(step_timeout=15, max_steps=10)
    assert step.exceeded(now - 500, None, 0) is None  # no step yet: still starting
    assert step.exceeded(now - 500, now - 5, 4) is None
    said = step.exceeded(now - 500, now - 16, 4)
    assert said == "run stopped: no step for 15 s after step 4 (step_timeout)"
    assert step.exceeded(now - 500, now - 60, 10) is None  # the last step: saving and leaving are not steps
