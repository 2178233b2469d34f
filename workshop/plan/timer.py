"""The one way this package times a kernel (a GEMM) on the wall clock: back-to-back calls until enough time
has passed that the clock's resolution and one slow call no longer matter."""

from __future__ import annotations

import time
from collections.abc import Callable


def seconds_per_call(
    fn: Callable[[], object],
    *,
    min_seconds: float,
    min_calls: int = 1,
    sync: Callable[[], object] | None = None,
) -> float:
    """Mean wall-clock seconds of one call of `fn`, called back to back until at least `min_seconds` have
    passed and `min_calls` calls ran. `sync` (torch.cuda.synchronize on a GPU) runs after every call, so work
    a device queues is counted where it is done, not where it is launched. Warm up before calling this."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if sync is not None:
            sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and calls >= min_calls:
            return elapsed / calls
