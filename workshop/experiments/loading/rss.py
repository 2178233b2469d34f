"""Resident memory, measured as it happens: the peak during a load, split into heap and mapped file pages."""

from __future__ import annotations

import resource
import threading
import time


class PeakRSS:
    """Samples this process's resident set every few milliseconds in a thread: the peak, as it happens.

    ru_maxrss says the same for the whole process lifetime; the sampler measures just the load, and it
    splits resident memory into anonymous (heap: tensors we own) and file-backed (mmap'd checkpoint pages
    the kernel may drop again), which is where safetensors' zero-copy loading shows up.
    """

    def __init__(self, interval_s: float = 0.005):
        self.interval_s = interval_s
        self.peak = self.peak_anon = self.peak_file = 0
        self._sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        rss, file_ = rss_split()
        self.peak = max(self.peak, rss)
        self.peak_anon = max(self.peak_anon, rss - file_)
        self.peak_file = max(self.peak_file, file_)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def rss_split() -> tuple[int, int]:
    """(resident, resident shared/file-backed) in bytes: psutil's rss and shared (Linux /proc/self/statm)."""
    import psutil

    mem = psutil.Process().memory_info()
    return mem.rss, getattr(mem, "shared", 0)  # no `shared` off Linux: no split, the total still holds


def rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def ru_maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
