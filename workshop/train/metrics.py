"""What a run measures and reports: one `METRIC {...}` line per optimizer step on rank 0 (loss, useful
tokens/s, step time, every rank's RSS) and `<output-dir>/metrics.json` at the end, the record every launcher
reads back.

`RunState` is what the Trainer subclass (it counts tokens) and the callback (it times steps) share.
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformers import TrainerCallback

from workshop.train.args import TrainArgs
from workshop.train.distributed import gather
from workshop.train.guard import NumericsGuard, versions
from workshop.train.logs import METRIC_PREFIX
from workshop.train.model import parameter_count


@dataclass
class RunState:
    """The run's counters between the Trainer's hooks."""

    steps: list[dict] = field(default_factory=list)  # one record per logged optimizer step
    tokens: int = 0  # useful (non-pad) tokens this rank saw since the last optimizer step
    t0: float = 0.0  # perf_counter at the start of training
    t_last: float = 0.0  # perf_counter at the end of the last step
    pending: dict | None = None  # the step just ended, waiting for its loss (on_log)
    allreduce_hooked: bool | None = None  # the shared-memory all-reduce is on DDP (None: not tried yet)
    average_in_allreduce: bool = True  # False: the fused optimizer step divides by the world size instead


def rss_gb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


class MetricsCallback(TrainerCallback):
    """Per optimizer step: step time, useful tokens/s over all ranks, every rank's RSS (rank 0 prints)."""

    def __init__(self, state: RunState, guard: NumericsGuard | None = None):
        self.state, self.guard = state, guard

    def on_train_begin(self, args, st, control, **kw):
        self.state.t_last = time.perf_counter()
        self.state.t0 = self.state.t_last

    def on_step_end(self, args, st, control, **kw):
        state, now = self.state, time.perf_counter()
        tokens, state.tokens = state.tokens, 0
        tokens = sum(gather(tokens))
        rss = [round(r, 3) for r in gather(rss_gb())]
        dt, state.t_last = now - state.t_last, now
        state.pending = {
            "step": st.global_step,
            "step_time_s": round(dt, 4),
            "tokens": tokens,
            "tokens_per_s": round(tokens / dt, 1) if dt > 0 else None,
            "rss_gb": rss,
            "elapsed_s": round(now - state.t0, 2),
        }

    def on_log(self, args, st, control, logs=None, **kw):
        rec, self.state.pending = self.state.pending, None
        if rec is None or not logs or "loss" not in logs:
            return
        grad_norm = logs.get("grad_norm")
        if (
            grad_norm is None
        ):  # the master-weights optimizer clips, so it knows the norm (workshop.train.master_weights)
            opt = kw.get("optimizer")
            grad_norm = getattr(getattr(opt, "optimizer", opt), "last_grad_norm", None)
        grad_norm = None if grad_norm is None else float(grad_norm)
        rec.update(
            loss=round(float(logs["loss"]), 4),
            lr=logs.get("learning_rate"),
            grad_norm=None if grad_norm is None else float(f"{grad_norm:.6g}"),
        )
        self.state.steps.append(rec)
        if st.is_world_process_zero:
            print(METRIC_PREFIX + json.dumps(rec), flush=True)
        if (
            self.guard is not None
        ):  # every rank sees the same (all-reduced) loss and norm, so all stop together
            self.guard.check(rec["step"], float(logs["loss"]), grad_norm)


def _steady_median(steps: list[dict], key: str) -> float | None:
    """statistics.median of `key` over the steps, like the rest of the package (an even count: the mean of
    the middle two)."""
    xs = [s[key] for s in steps if s[key] is not None]
    return statistics.median(xs) if xs else None


def summarize(steps: list[dict], **extra) -> dict:
    """metrics.json: the per-step records plus medians that skip the first (warm-up) step."""
    steady = steps[1:] or steps
    return {
        "steps": steps,
        "first_loss": steps[0]["loss"] if steps else None,
        "final_loss": steps[-1]["loss"] if steps else None,
        "tokens_per_s_median": _steady_median(steady, "tokens_per_s"),
        "step_time_s_median": _steady_median(steady, "step_time_s"),
        **extra,
    }


def record_run(
    args: TrainArgs,
    state: RunState,
    model,
    *,
    global_step: int,
    backend: str,
    precision_why: str,
    resumed_from: str | None,
    final: Path | None,
) -> dict:
    """The run's result: every rank takes part in the gathers, rank 0 writes metrics.json and says so."""
    import torch
    import torch.distributed as dist

    world, out = dist.get_world_size(), Path(args.output_dir)
    partition = zero3_partition(model, world)
    peaks = gather(round(peak_rss_gb(), 3))
    result = summarize(
        state.steps,
        world_size=world,
        backend=backend,
        peak_rss_gb_per_rank=peaks,
        partition=partition,
        resumed_from=resumed_from,
        global_step=global_step,
        final_model=str(final) if final else None,
        params=parameter_count(model),
        torch=torch.__version__,
        versions=versions(),
        precision_why=precision_why,
        args=asdict(args),
    )
    if dist.get_rank() == 0:
        (out / "metrics.json").write_text(json.dumps(result, indent=2))
        print(
            f"workshop.train: done, {len(state.steps)} steps, loss {result['first_loss']} -> "
            f"{result['final_loss']}, median {result['tokens_per_s_median']} tokens/s, metrics in "
            f"{out / 'metrics.json'}",
            flush=True,
        )
    return result


def zero3_partition(model, world: int, max_params: int = 1000) -> dict | None:
    """What each rank really holds under ZeRO-3: per parameter, its full numel and every rank's local numel.

    DeepSpeed pads each parameter so it splits evenly: a rank holds ceil(numel / N) elements of it.
    """
    params = [(n, p) for n, p in model.named_parameters() if hasattr(p, "ds_tensor")]
    if not params:
        return None
    local = [int(p.ds_tensor.numel()) for _, p in params]
    per_rank = gather(local)
    rows = [
        {"name": n, "numel": int(p.ds_numel), "local_numel": [r[i] for r in per_rank]}
        for i, (n, p) in enumerate(params)
    ][:max_params]
    return {
        "world_size": world,
        "total_numel": sum(int(p.ds_numel) for _, p in params),
        "local_numel_per_rank": [sum(r) for r in per_rank],
        "params": rows,
    }
