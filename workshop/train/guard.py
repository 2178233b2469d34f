"""Guards that stop a run which would otherwise train on garbage, loudly and early.

Two failures have bitten learners: a DeepSpeed release whose ZeRO-3 gather races on gloo (parameters read
before they arrive, so loss 0.0 or grad norms of 1e7 with no error), and a run that diverges and keeps going.
The version check runs before a process group exists; the numerics check runs on every logged step.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from importlib import metadata

from workshop.errors import WorkshopError

# DeepSpeed before 0.19.8: `Init._allgather_params_coalesced` waits only on the LAST async all-gather handle.
# On NCCL the handles complete in order on one stream; on gloo each runs on its own thread, in any order, so
# ZeRO-3 reads partly-gathered parameters (DeepSpeed PR 8539, fixed in 0.19.8).
GLOO_ZERO3_FIXED_IN = (0, 19, 8)
FIX_COMMAND = 'pip install -c constraints.txt -e ".[test]"   (or: pip install "deepspeed>=0.19.8")'
TRACKED = ("torch", "deepspeed", "transformers", "accelerate", "datasets", "tokenizers")


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_deepspeed(backend: str, zero_stage: int, version: str | None = None) -> None:
    """Refuse ZeRO-3 on gloo with a DeepSpeed release known to corrupt it (one line: version and fix)."""
    if backend != "gloo" or zero_stage != 3 or os.environ.get("WORKSHOP_ALLOW_BROKEN_DEEPSPEED") == "1":
        return  # the variable exists so the numerics tests can show what this check prevents
    version = version or metadata.version("deepspeed")
    if _release(version) < GLOO_ZERO3_FIXED_IN:
        fixed = ".".join(map(str, GLOO_ZERO3_FIXED_IN))
        raise WorkshopError(
            f"deepspeed {version} corrupts ZeRO-3 on gloo (its coalesced all-gather waits only on "
            f"the last handle; fixed in {fixed}); install the tested set: {FIX_COMMAND}"
        )


def versions() -> dict[str, str | None]:
    """The resolved versions of the libraries a result depends on, for every metrics and benchmark JSON."""
    out: dict[str, str | None] = {}
    for name in TRACKED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


class TrainingDiverged(WorkshopError):
    """The run's numbers are wrong: stopping is cheaper than training on."""


@dataclass
class NumericsGuard:
    """Stop at the first step whose loss is not finite or exactly 0, or whose grad norm jumps by
    `max_grad_jump` times the median of the steps before it (0 turns the jump check off).

    Loss exactly 0.0 on a language model means the logits are garbage (it is what the gloo race produced), not
    a perfect fit. Grad norms of a healthy run move by small factors; the race gave jumps of 10^7.
    """

    max_grad_jump: float = 1e3
    warmup: int = 2  # steps before the jump check has a history to compare with
    history: list[float] = field(default_factory=list)

    def check(self, step: int, loss: float, grad_norm: float | None) -> None:
        if not math.isfinite(loss):
            raise TrainingDiverged(f"step {step}: loss is {loss}; stopping instead of training on")
        if loss == 0.0:
            raise TrainingDiverged(
                f"step {step}: loss is exactly 0.0, which a language model only reports when "
                "its numbers are wrong (a corrupted ZeRO-3 gather does this); stopping"
            )
        if grad_norm is None:
            return
        if not math.isfinite(grad_norm):
            raise TrainingDiverged(f"step {step}: grad norm is {grad_norm}; stopping instead of training on")
        if self.max_grad_jump and len(self.history) >= self.warmup:
            ref = sorted(self.history)[len(self.history) // 2]
            if ref > 0 and grad_norm > self.max_grad_jump * ref:
                raise TrainingDiverged(
                    f"step {step}: grad norm {grad_norm:.4g} is {grad_norm / ref:.3g}x the median "
                    f"{ref:.4g} of the steps before (limit: --max-grad-jump {self.max_grad_jump:g}, 0 turns "
                    "this check off); stopping"
                )
        self.history.append(grad_norm)
