"""One checkpoint policy (rev-en 2): `workshop plan` with no checkpoint flag prices the workbook's stated
share (options.CHECKPOINT_SHARE), as chapters 01, 02 and 05 do; --checkpoint-minutes replaces it, not both."""

from __future__ import annotations

import json

import pytest

from workshop.cli.plan import plan as plan_command
from workshop.plan import options

FLAGS = ["--source", "moto", "--family", "c7i", "--nodes", "1"]


def test_default_is_the_stated_share(tmp_path):
    path = tmp_path / "p.json"
    assert plan_command([*FLAGS, "--out", str(path)]) == 0
    p = json.loads(path.read_text())["prediction"]
    assert p["checkpoint_hours"] / p["hours"] == pytest.approx(options.CHECKPOINT_SHARE, abs=0.01)
    assert options.FixedCosts().checkpoint_share == options.CHECKPOINT_SHARE


def test_minutes_replace_the_share_and_both_are_refused(tmp_path, capsys):
    path = tmp_path / "p.json"
    assert plan_command([*FLAGS, "--checkpoint-minutes", "0", "--out", str(path)]) == 0
    assert json.loads(path.read_text())["prediction"]["checkpoint_hours"] == 0
    assert plan_command([*FLAGS, "--checkpoint-minutes", "30", "--checkpoint-share", "0.05"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--checkpoint-minutes 30 and --checkpoint-share 0.05" in err[0]
