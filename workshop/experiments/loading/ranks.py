"""What torchrun starts per rank (`python -m workshop.experiments.loading worker|pitfall JSON`): one JSON spec
each, no argument parser; the command is `workshop load`."""

from __future__ import annotations

import json
import os
import sys

from workshop.experiments.loading.pitfalls import run_pitfall_here, run_pitfalls_here
from workshop.experiments.loading.worker import run_worker
from workshop.train.shm import release_shm_buffers


def worker(spec: dict) -> None:
    """One rank of one method (spec: method, checkpoint, out_dir, dtype, low_cpu_mem_usage, verify); writes
    rank<N>.json into out_dir and ends the process without interpreter teardown."""
    try:
        run_worker(
            spec["method"],
            spec["checkpoint"],
            spec["out_dir"],
            dtype=spec.get("dtype", "bf16"),
            low_cpu_mem_usage=spec.get("low_cpu_mem_usage"),
            verify=spec.get("verify", True),
        )
    finally:  # os._exit below skips atexit: free DeepSpeed's /dev/shm buffers here, however it went
        release_shm_buffers()
    # The report is on disk and the process group is gone. Skip interpreter teardown: a DeepSpeed/gloo
    # C++ thread left joinable after zero.Init can abort the exit ("terminate called without an active
    # exception", SIGABRT, seen once in CI), which would fail a measurement that already succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def pitfall(spec: dict) -> None:
    """One pitfall in this process (spec: name, checkpoint, out_file, rank0_only), or several in order
    (spec: names instead of name); prints what happened."""
    rank0 = not spec.get("rank0_only") or os.environ.get("RANK", "0") == "0"
    out_file = spec["out_file"] if rank0 else os.devnull
    try:  # the pitfalls fail on purpose; their DeepSpeed buffers must not outlive them
        if "names" in spec:
            print(json.dumps(run_pitfalls_here(spec["names"], spec["checkpoint"], out_file)))
        else:
            print(json.dumps(run_pitfall_here(spec["name"], spec["checkpoint"], out_file)))
    finally:
        release_shm_buffers()
