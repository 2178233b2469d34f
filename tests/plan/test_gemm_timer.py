"""The one matmul timer (plan.gemm.seconds_per_call): it times whole calls, at least two and at least
min_seconds, and syncs after each call so that queued GPU work is counted."""

import time

from workshop.plan.gemm import seconds_per_call


def test_it_times_back_to_back_calls_and_syncs_after_each():
    calls, syncs = [], []

    def work():
        calls.append(1)
        time.sleep(0.002)

    t0 = time.perf_counter()
    seconds = seconds_per_call(work, min_seconds=0.02, sync=lambda: syncs.append(1))
    outside = time.perf_counter() - t0
    assert len(calls) == len(syncs) >= 2
    assert seconds >= 0.002  # at least one call's sleep
    assert 0.02 <= seconds * len(calls) <= outside  # per call: the loop's time over its calls


def test_a_slow_call_is_still_timed_at_least_twice():
    calls = []
    seconds = seconds_per_call(lambda: (calls.append(1), time.sleep(0.01)), min_seconds=0.0)
    assert len(calls) == 2 and seconds >= 0.01
