"""DeepSpeed ZeRO-3, call by call: the collectives a step issues, derived from the architecture, and the
counter that records what a real run calls (the ground truth the derivation is checked against).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from workshop.plan.models import build_config
from workshop.plan.traffic import Traffic, gathers_per_micro_step, ring_factor

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
    """Collective calls and full-buffer bytes per optimizer step, derived from the model's parameter
    shapes."""

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
        return Traffic(
            3,
            world,
            self.params,
            grad_accum,
            2,
            self.gather_passes,
            r * self.all_gather_bytes,
            r * self.reduce_scatter_bytes,
            0.0,
            0.0,
            0.0,
        )

    @property
    def n_ops(self) -> dict:
        """Latencies paid per step: one per wave of all-gathers, one per reduce-scatter bucket."""
        return {"all_gather": self.all_gather_waves, "reduce_scatter": self.reduce_scatter_calls}


def zero3_calls(
    model: str,
    *,
    grad_accum: int = 1,
    grad_ckpt: bool = False,
    bytes_per_param: int = 2,
    settings: Zero3Settings | None = None,
) -> Zero3Calls:
    """Count ZeRO-3's collectives from the architecture (meta device, no weights), the way DeepSpeed issues
    them.

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
        params=total,
        partitioned=part,
        persistent_params=len(persistent),
        persistent=sum(persistent),
        gather_passes=passes,
        all_gather_calls=grad_accum * passes * fetch_calls + len(persistent),
        all_gather_bytes=float(bytes_per_param) * (grad_accum * passes * part + sum(persistent)),
        reduce_scatter_calls=grad_accum * rs_calls,
        reduce_scatter_bytes=float(bytes_per_param) * grad_accum * total,
        all_gather_waves=grad_accum * passes * fetch_calls + (1 if persistent else 0),
    )
