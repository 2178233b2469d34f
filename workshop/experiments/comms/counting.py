"""What a real ZeRO-3 run calls: torch.distributed's collectives wrapped by counters, snapshotted at every
optimizer step (the ground truth `workshop.plan.zero3` is checked against).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from workshop import train

_COUNTED = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "barrier",
    "all_gather_object",
    "broadcast_object_list",
)


def _nbytes(op: str, args, kwargs) -> int:
    """The full buffer a call moves, in the benchmark's convention (the gathered / reduced tensor)."""
    import torch

    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    lists = [
        a
        for a in (*args, *kwargs.values())
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)
    ]
    if op in ("all_gather", "reduce_scatter") and lists:
        return sum(t.numel() * t.element_size() for t in lists[0])
    return max((t.numel() * t.element_size() for t in tensors), default=0)


def _count_worker(argv: list[str]) -> int:
    """Run the training entry point with torch.distributed's collectives wrapped by counters.

    Each optimizer step (DeepSpeed's _take_model_step) snapshots the counts, so the JSON holds calls and
    bytes per step by collective: the ground truth the architecture-derived call count is checked against.
    """
    import torch.distributed as dist
    from deepspeed.runtime.engine import DeepSpeedEngine

    out, train_argv = argv[0], argv[1:]
    live: dict[str, list[int]] = {}
    snaps: list[dict] = []
    trace: list[tuple] = []  # (optimizer steps done, collective, bytes) for every call

    def wrap(op, fn):
        def counted(*args, **kwargs):
            c = live.setdefault(op, [0, 0])
            n = _nbytes(op, args, kwargs)
            c[0] += 1
            c[1] += n
            trace.append((len(snaps), op, n))
            return fn(*args, **kwargs)

        return counted

    for op in _COUNTED:
        setattr(dist, op, wrap(op, getattr(dist, op)))
    take = DeepSpeedEngine._take_model_step
    step_s = [0.0]

    def snap_after(self, *a, **k):
        t0 = time.perf_counter()
        r = take(self, *a, **k)
        step_s[0] += time.perf_counter() - t0
        snaps.append({**{op: list(v) for op, v in live.items()}, "_step_s": [0, step_s[0]]})
        return r

    DeepSpeedEngine._take_model_step = snap_after

    train.train(train.parse_args(train_argv))  # the launcher validated these flags: no bad input here
    if int(os.environ.get("RANK", "0")) == 0:
        Path(out).write_text(json.dumps({"snapshots": snaps, "trace": trace}))
    return 0


def per_step_calls(snapshots: list[dict], skip: int = 1) -> dict[str, dict]:
    """Calls and bytes between consecutive optimizer steps (skipping warm-up), median over steps.

    The pseudo-op "_step_s" carries the seconds spent in DeepSpeed's optimizer step (as its "bytes")."""
    diffs = []
    for a, b in zip(snapshots[skip:], snapshots[skip + 1 :]):
        diffs.append({op: (v[0] - a.get(op, [0, 0])[0], v[1] - a.get(op, [0, 0])[1]) for op, v in b.items()})
    ops = sorted({op for d in diffs for op in d})
    return (
        {
            op: {
                "calls": statistics.median(d.get(op, (0, 0))[0] for d in diffs),
                "bytes": statistics.median(d.get(op, (0, 0))[1] for d in diffs),
            }
            for op in ops
        }
        if diffs
        else {}
    )
