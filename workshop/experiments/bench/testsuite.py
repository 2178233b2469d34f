"""`workshop bench suite`: the README's test command, timed per test file (and per notebook), appended to the
per-machine history in benchmarks/results/timings.json; a slower file shows beside the old rows."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from workshop.launch import timings
from workshop.paths import REPO


def per_file(junit_xml: Path) -> tuple[dict[str, float], Counter]:
    """Seconds per test file (xunit1's `file` attribute; nbval's cells under their notebook) and the
    outcome counts, from pytest's JUnit XML."""
    seconds: dict[str, float] = {}
    outcomes: Counter = Counter()
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        where = case.get("file") or (case.get("classname") or "?").replace(".", "/")
        seconds[where] = seconds.get(where, 0.0) + float(case.get("time") or 0)
        kinds = {child.tag for child in case}
        outcomes[
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        ] += 1
    return seconds, outcomes


def time_suite(
    pytest_args: Sequence[str] = (), timings_path: Path = timings.TIMINGS, echo=print
) -> tuple[int, timings.Timing]:
    """Run `python -m pytest -q` (plus `pytest_args`) in the checkout, timed per file; a run that passed is
    appended to `timings_path`. Returns pytest's exit code and the timing."""
    with tempfile.TemporaryDirectory(prefix="workshop-suite-") as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-o", "junit_family=xunit1", f"--junitxml={xml}"]
        t0 = time.time()
        code = subprocess.call([*cmd, *pytest_args], cwd=REPO)
        wall = time.time() - t0
        seconds, outcomes = per_file(xml) if xml.exists() else ({}, Counter())
    timing = timings.new_timing(
        "suite",
        dict(sorted(seconds.items(), key=lambda kv: -kv[1])),
        note=f"python -m pytest -q {' '.join(pytest_args)}".strip(),
        wall_s=round(wall, 1),
        exit_code=code,
        **outcomes,
    )
    if code == 0:
        echo(f"wrote {timings.record(timing, timings_path)}")
    return code, timing
