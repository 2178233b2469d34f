"""workshop.plan.timer: the one wall-clock timer of a kernel (ceiling's GEMM probe uses it)."""

import time

from workshop.plan.timer import seconds_per_call


def test_seconds_per_call_runs_until_both_bounds_and_syncs_after_each_call():
    calls: list[str] = []
    t = seconds_per_call(
        lambda: calls.append("fn"), min_seconds=0.0, min_calls=3, sync=lambda: calls.append("sync")
    )
    assert calls == ["fn", "sync"] * 3 and 0 <= t < 0.01
    slept = seconds_per_call(lambda: time.sleep(0.01), min_seconds=0.05)
    assert 0.009 < slept < 0.05  # the mean of the calls, not their sum


def test_the_time_per_call_is_the_loops_time_over_its_calls():
    calls = []
    t0 = time.perf_counter()
    seconds = seconds_per_call(lambda: (calls.append(1), time.sleep(0.002)), min_seconds=0.02, min_calls=2)
    outside = time.perf_counter() - t0
    assert len(calls) >= 2 and seconds >= 0.002
    assert 0.02 <= seconds * len(calls) <= outside
