"""What a run measures and reports: one `METRIC {...}` line per optimizer step on rank 0 (loss, useful
tokens/s, step time, every rank's RSS; on an evaluation step also the held-out loss and perplexity) and
`<output-dir>/metrics.json` at the end, the record every launcher reads back.

`RunState` is what the Trainer subclass (it counts tokens) and the callback (it times steps) share.
"""

from __future__ import annotations

import json
import math
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
from workshop.train.lora import trainable_count
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
    awaiting_eval: dict | None = None  # a logged step whose evaluation runs next: printed with its eval loss
    eval_at_end: bool = False  # a held-out split exists: evaluate at the last step too


def rss_gb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**30


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


class MetricsCallback(TrainerCallback):
    """Per optimizer step: step time, useful tokens/s over all ranks, every rank's RSS (rank 0 prints); on an
    evaluation step the held-out loss joins the step's line. `sink`: rank 0 hands it each finished record
    (the TensorBoard writer)."""

    def __init__(self, state: RunState, guard: NumericsGuard | None = None, sink=None):
        self.state, self.guard, self.sink = state, guard, sink

    def on_train_begin(self, args, st, control, **kw):
        self.state.t_last = time.perf_counter()
        self.state.t0 = self.state.t_last

    def on_step_end(self, args, st, control, **kw):
        state, now = self.state, time.perf_counter()
        if state.eval_at_end and st.global_step >= st.max_steps:
            control.should_evaluate = True  # the final held-out loss, on the last step's line
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
        return control

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
        if control.should_evaluate:  # the Trainer evaluates next: the line waits for the held-out loss
            self.state.awaiting_eval = rec
        else:
            self._emit(st, rec)
        if (
            self.guard is not None
        ):  # every rank sees the same (all-reduced) loss and norm, so all stop together
            self.guard.check(rec["step"], float(logs["loss"]), grad_norm)

    def on_evaluate(self, args, st, control, metrics=None, **kw):
        """The held-out loss every rank's shard gave, reduced by the Trainer: onto the step's line."""
        rec, self.state.awaiting_eval = self.state.awaiting_eval, None
        now = time.perf_counter()
        loss = (metrics or {}).get("eval_loss")
        if rec is not None:
            rec.update(
                eval_loss=None if loss is None else round(float(loss), 4),
                eval_perplexity=None if loss is None else round(perplexity(float(loss)), 3),
                eval_s=round(now - self.state.t_last, 3),
            )
            self._emit(st, rec)
        self.state.t_last = now  # evaluation time is not the next step's

    def _emit(self, st, rec: dict) -> None:
        if st.is_world_process_zero:
            print(METRIC_PREFIX + json.dumps(rec), flush=True)
            if self.sink is not None:
                self.sink(rec)


def perplexity(loss: float) -> float:
    """exp(mean token cross-entropy): the number of equally likely tokens the model is choosing among."""
    return math.exp(min(loss, 700.0))  # exp overflows past ~709


def _steady_median(steps: list[dict], key: str) -> float | None:
    """statistics.median of `key` over the steps, like the rest of the package (an even count: the mean of
    the middle two)."""
    xs = [s[key] for s in steps if s[key] is not None]
    return statistics.median(xs) if xs else None


def summarize(steps: list[dict], **extra) -> dict:
    """metrics.json: the per-step records plus medians that skip the first (warm-up) step."""
    steady = steps[1:] or steps
    evals = [s for s in steps if s.get("eval_loss") is not None]
    return {
        "steps": steps,
        "first_loss": steps[0]["loss"] if steps else None,
        "final_loss": steps[-1]["loss"] if steps else None,
        "first_eval_loss": evals[0]["eval_loss"] if evals else None,
        "final_eval_loss": evals[-1]["eval_loss"] if evals else None,
        "final_eval_perplexity": evals[-1]["eval_perplexity"] if evals else None,
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
    eval_samples: int = 0,
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
        trainable_params=trainable_count(model),
        eval_samples=eval_samples,
        torch=torch.__version__,
        versions=versions(),
        precision_why=precision_why,
        args=asdict(args),
    )
    if dist.get_rank() == 0:
        (out / "metrics.json").write_text(json.dumps(result, indent=2))
        print(
            f"workshop.train: done, {len(state.steps)} steps, loss {result['first_loss']} -> "
            f"{result['final_loss']}"
            + (
                f", held-out loss {result['final_eval_loss']} (perplexity {result['final_eval_perplexity']})"
                if result["final_eval_loss"] is not None
                else ""
            )
            + f", median {result['tokens_per_s_median']} tokens/s, metrics in {out / 'metrics.json'}",
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
