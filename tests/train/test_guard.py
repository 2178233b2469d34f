"""The numerics guard stops a run at the step that goes wrong, naming the step and the value."""

import math

import pytest

from workshop.train.guard import NumericsGuard, TrainingDiverged, _release, versions


@pytest.mark.parametrize(
    "loss, grad, pattern",
    [
        (math.nan, 1.0, r"step 4: loss is nan"),
        (math.inf, 1.0, r"step 4: loss is inf"),
        (0.0, 1.0, r"step 4: loss is exactly 0\.0"),
        (5.0, math.nan, r"step 4: grad norm is nan"),
    ],
)
def test_bad_numbers_stop_at_once(loss, grad, pattern):
    guard = NumericsGuard()
    for step, g in enumerate([2.7, 3.1, 2.9], start=1):
        guard.check(step, 9.0, g)
    with pytest.raises(TrainingDiverged, match=pattern):
        guard.check(4, loss, grad)


def test_a_grad_norm_jump_stops_the_run_naming_the_threshold():
    guard = NumericsGuard(max_grad_jump=1000)
    for step, g in enumerate([2.7, 3.4, 3.1], start=1):
        guard.check(step, 9.0, g)
    guard.check(4, 8.9, 40.0)  # 13x: a rough step, not corruption
    with pytest.raises(
        TrainingDiverged,
        match=r"step 5: grad norm 6\.07e\+07 is 1\.79e\+07x the median 3\.4 .*"
        r"--max-grad-jump 1000",
    ):
        guard.check(5, 8.8, 6.07e7)


def test_the_jump_check_can_be_turned_off_and_waits_for_history():
    NumericsGuard(max_grad_jump=0).check(1, 9.0, 1e9)
    guard = NumericsGuard()
    guard.check(1, 9.0, 1.0)
    guard.check(2, 9.0, 1e6)  # only one step of history: no reference yet
    with pytest.raises(TrainingDiverged):
        guard.check(3, 9.0, 1e10)


def test_version_parsing_and_the_recorded_set():
    assert _release("0.19.7") < (0, 19, 8) <= _release("0.19.8") < _release("0.20.0rc1")
    assert _release("2.13.0+cpu") == (2, 13, 0)
    v = versions()
    assert set(v) >= {"torch", "deepspeed", "transformers"} and v["deepspeed"]


def test_a_bad_threshold_is_refused_before_anything_starts():
    from workshop.errors import WorkshopError
    from workshop.train import parse_args

    with pytest.raises(WorkshopError, match=r"max-grad-jump must be a number >= 0, got -1"):
        parse_args(["--max-grad-jump", "-1"])
