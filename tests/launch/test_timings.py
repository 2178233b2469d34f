"""The per-machine timing history: what `workshop run` expects before it starts; `workshop bench suite`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from workshop.errors import WorkshopError
from workshop.launch import timings
from workshop.paths import REPO

AMX = timings.Machine("Xeon", "amx", 2)
ZEN = timings.Machine("EPYC", "avx512_bf16", 2)


def _run(machine, date, **parts):
    return timings.Timing(
        "workbook", machine, date, sum(parts.values()), {f"{k[1:]}_x.ipynb": v for k, v in parts.items()}
    )


def test_history_round_trip_keeps_every_run(tmp_path):
    path = tmp_path / "timings.json"
    timings.record(_run(ZEN, "2026-11-27", c01=20, c04=184), path)
    timings.record(_run(ZEN, "2026-11-28", c01=18, c04=150), path)
    runs = timings.load(path)
    assert [r.date for r in runs] == ["2026-11-27", "2026-11-28"]
    assert runs[1].parts == {"01_x.ipynb": 18.0, "04_x.ipynb": 150.0}


def test_expectation_prefers_the_newest_run_of_the_same_cpu_kind(tmp_path):
    path = tmp_path / "timings.json"
    timings.record(_run(AMX, "2026-11-27", c01=28, c04=338), path)
    timings.record(_run(ZEN, "2026-11-28", c01=20, c04=184), path)
    line = timings.expectation(["04"], here=timings.Machine("other Xeon", "amx", 2), path=path)
    assert "04: 338 s" in line and "2026-11-27" in line and "another kind" not in line
    line = timings.expectation(["01", "04"], here=ZEN, path=path)
    assert "01: 20 s, 04: 184 s" in line and "3.4 min" in line


def test_expectation_takes_the_last_recorded_of_the_newest_date(tmp_path):
    """Two runs on one day: the one recorded last is the newest (the README's figures are its)."""
    path = tmp_path / "timings.json"
    timings.record(_run(ZEN, "2026-11-28", c03=128, c04=246), path)
    timings.record(_run(ZEN, "2026-11-28", c03=125, c04=242), path)
    timings.record(_run(ZEN, "2026-11-27", c03=121, c04=184), path)  # an older date, recorded later
    line = timings.expectation(["03", "04"], here=ZEN, path=path)
    assert "03: 125 s, 04: 242 s" in line and "2026-11-28" in line


def test_expectation_says_a_busy_machine_will_take_longer(tmp_path):
    path = tmp_path / "timings.json"
    timings.record(_run(ZEN, "2026-11-28", c04=242), path)
    quiet = timings.expectation(["04"], here=ZEN, path=path, busy=0.2)
    busy = timings.expectation(["04"], here=ZEN, path=path, busy=1.6)
    assert "longer" not in quiet
    assert busy.startswith(quiet) and "about 1.6 of this machine's 2 CPUs" in busy and "longer" in busy


def test_busy_cpus_counts_a_spinning_neighbour():
    """A process spinning on one core while busy_cpus waits shows as (about) one busy CPU or more."""
    spin = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"])
    try:
        time.sleep(0.3)  # past the child's start
        assert timings.busy_cpus(1.0) >= 0.7
    finally:
        spin.wait()


def test_expectation_says_when_the_nearest_run_is_another_kind_of_cpu(tmp_path):
    path = tmp_path / "timings.json"
    timings.record(_run(ZEN, "2026-11-28", c04=184), path)
    line = timings.expectation(["04"], here=timings.Machine("old Xeon", "other", 2), path=path)
    assert "another kind of CPU" in line and "old Xeon" in line
    assert timings.expectation(["02"], here=ZEN, path=path) is None  # no stored time for that chapter
    assert timings.expectation(["04"], here=ZEN, path=tmp_path / "none.json") is None


def test_a_damaged_record_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"runs": [{"kind": "workbook", "date": "2026-11-28"}]}))
    with pytest.raises(WorkshopError, match="timings.json is damaged"):
        timings.load(path)
    path.write_text("{")
    with pytest.raises(WorkshopError, match="not valid JSON"):
        timings.load(path)


def test_the_stored_history_reads_and_names_its_machines():
    runs = timings.load()
    assert runs and all(r.machine.cpu_model and r.date for r in runs)
    assert {r.machine.cpu_kind for r in runs if r.kind == "workbook"} >= {"amx", "avx512_bf16"}


def test_from_index_times_a_finished_run_only(tmp_path):
    ok = [
        {"notebook": "01_a.ipynb", "status": "ok", "seconds": 20.0},
        {"notebook": "02_b.ipynb", "status": "ok", "seconds": 5.5},
    ]
    (tmp_path / "index.json").write_text(json.dumps(ok))
    t = timings.from_index(tmp_path)
    assert t.kind == "workbook" and t.total_s == 25.5 and t.machine == timings.this_machine()
    (tmp_path / "index.json").write_text(json.dumps([{**ok[0], "status": "failed"}]))
    assert timings.from_index(tmp_path) is None


def test_bench_suite_times_a_pytest_run_per_file(tmp_path):
    target = "tests/launch/test_timings.py::test_history_round_trip_keeps_every_run"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "workshop",
            "bench",
            "suite",
            "--results-dir",
            str(tmp_path),
            target,
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = timings.load(tmp_path / "timings.json")
    assert run.kind == "suite" and run.extra["passed"] == 1 and run.extra["exit_code"] == 0
    assert list(run.parts) == ["tests/launch/test_timings.py"]
