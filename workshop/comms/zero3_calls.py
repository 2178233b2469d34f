"""DeepSpeed ZeRO-3, call by call: the collectives a step issues, derived from the architecture, and the
counter that records what a real run calls (the ground truth the derivation is checked against).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from workshop.comms.model import Traffic, gathers_per_micro_step, ring_factor

# ---------------------------------------------------------------- DeepSpeed ZeRO-3, call by call

@dataclass(frozen=True)
class Zero3Settings:
    """The DeepSpeed ZeRO-3 knobs that decide how many collectives a step issues (DeepSpeed's defaults)."""

    param_persistence_threshold: float = 1e5  # params this small are never partitioned...
    prefetch_bucket_size: float = 5e7  # ...the rest are fetched in coalesced buckets of this many elements
    max_reuse_distance: float = 1e9  # a gathered param is kept if it is used again within this many elements
    max_live_parameters: float = 1e9
    reduce_bucket_size: float = 5e8


@dataclass(frozen=True)
class Zero3Calls:
    """Collective calls and full-buffer bytes per optimizer step, derived from the model's parameter shapes."""

    params: int
    partitioned: int  # elements of partitioned parameters
    persistent_params: int  # how many parameters stay whole on every rank
    persistent: int  # their elements
    gather_passes: int  # forward only (kept for backward), or forward + backward (+ recompute)
    all_gather_calls: int
    all_gather_bytes: float  # full gathered buffers
    reduce_scatter_calls: int
    reduce_scatter_bytes: float
    all_gather_waves: int  # groups of calls launched together and waited for together: one latency each

    def traffic(self, world: int, grad_accum: int = 1) -> Traffic:
        """The same step as per-rank wire bytes ((N-1)/N of every buffer), for collective_time()."""
        r = ring_factor(world)
        return Traffic(3, world, self.params, grad_accum, 2, self.gather_passes, r * self.all_gather_bytes,
                       r * self.reduce_scatter_bytes, 0.0, 0.0, 0.0)

    @property
    def n_ops(self) -> dict:
        """Latencies paid per step: one per wave of all-gathers, one per reduce-scatter bucket."""
        return {"all_gather": self.all_gather_waves, "reduce_scatter": self.reduce_scatter_calls}


def zero3_calls(model: str, *, grad_accum: int = 1, grad_ckpt: bool = False, bytes_per_param: int = 2,
                settings: Zero3Settings | None = None) -> Zero3Calls:
    """Count ZeRO-3's collectives from the architecture (meta device, no weights), the way DeepSpeed issues them.

    - A parameter with at most `param_persistence_threshold` elements stays whole on every rank; after each
      optimizer step DeepSpeed all-gathers the updated persistent parameters, ONE CALL PER PARAMETER, all
      launched asynchronously and then waited for: one wave, so one latency, however many calls.
    - The others are fetched with prefetching: one coalesced all-gather per `prefetch_bucket_size` elements.
    - A fetched parameter is released only if it is not used again within `max_reuse_distance` elements (and
      live parameters stay under `max_live_parameters`). A model smaller than both keeps its forward gather
      for the backward pass; a larger one (Llama-3-8B) gathers again for backward and for recompute.
    - Gradients are reduce-scattered in buckets of `reduce_bucket_size` elements, every micro-step.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from workshop.models import build_config

    st = settings or Zero3Settings()
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(build_config(model))
    sizes = [p.numel() for p in net.parameters()]
    persistent = [n for n in sizes if n <= st.param_persistence_threshold]
    total, part = sum(sizes), sum(sizes) - sum(persistent)
    keep = total <= min(st.max_reuse_distance, st.max_live_parameters)
    passes = 1 if keep else gathers_per_micro_step(grad_ckpt)
    fetch_calls = math.ceil(part / st.prefetch_bucket_size) if part else 0
    rs_calls = math.ceil(total / st.reduce_bucket_size)
    return Zero3Calls(
        params=total, partitioned=part, persistent_params=len(persistent), persistent=sum(persistent),
        gather_passes=passes,
        all_gather_calls=grad_accum * passes * fetch_calls + len(persistent),
        all_gather_bytes=float(bytes_per_param) * (grad_accum * passes * part + sum(persistent)),
        reduce_scatter_calls=grad_accum * rs_calls,
        reduce_scatter_bytes=float(bytes_per_param) * grad_accum * total,
        all_gather_waves=grad_accum * passes * fetch_calls + (1 if persistent else 0))


# ---------------------------------------------------------------- counting what ZeRO-3 really calls

_COUNTED = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
            "broadcast", "barrier", "all_gather_object", "broadcast_object_list")


def _nbytes(op: str, args, kwargs) -> int:
    """The full buffer a call moves, in the benchmark's convention (the gathered / reduced tensor)."""
    import torch

    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple)) and a
             and isinstance(a[0], torch.Tensor)]
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
    from workshop import train

    rc = train.main(train_argv)
    if int(os.environ.get("RANK", "0")) == 0:
        Path(out).write_text(json.dumps({"snapshots": snaps, "trace": trace}))
    return rc


def per_step_calls(snapshots: list[dict], skip: int = 1) -> dict[str, dict]:
    """Calls and bytes between consecutive optimizer steps (skipping warm-up), median over steps.

    The pseudo-op "_step_s" carries the seconds spent in DeepSpeed's optimizer step (as its "bytes")."""
    diffs = []
    for a, b in zip(snapshots[skip:], snapshots[skip + 1:]):
        diffs.append({op: (v[0] - a.get(op, [0, 0])[0], v[1] - a.get(op, [0, 0])[1]) for op, v in b.items()})
    ops = sorted({op for d in diffs for op in d})
    return {op: {"calls": statistics.median(d.get(op, (0, 0))[0] for d in diffs),
                 "bytes": statistics.median(d.get(op, (0, 0))[1] for d in diffs)} for op in ops} if diffs else {}
