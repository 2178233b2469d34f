"""Threads per rank changed between optimizer steps, so one launch can measure several settings side by side
(chapter 04's thread sweep): WORKSHOP_THREADS_BY_STEP="1,1,1,2,2,2" runs step k with the k-th count
(torch.set_num_threads before the step) and each METRIC line says the count its step ran with.

Why: each setting and round used to be a launch of its own, and a launch pays the ranks' start-up (imports,
process group, ZeRO-3 init: ~10 s on 2 cores) for a few steps of a fraction of a second; in one launch it is
paid once, and the settings alternate within one process, the finest interleaving there is.
"""

from __future__ import annotations

import os

from transformers import TrainerCallback

from workshop.errors import WorkshopError
from workshop.train.metrics import RunState

THREADS_BY_STEP = "WORKSHOP_THREADS_BY_STEP"


def threads_by_step(text: str | None = None) -> list[int] | None:
    """The per-step thread counts WORKSHOP_THREADS_BY_STEP asks for (None when unset); a bad entry is one
    clear error naming it."""
    text = os.environ.get(THREADS_BY_STEP) if text is None else text
    if not text:
        return None
    counts = []
    for item in text.split(","):
        if not item.strip().isdigit() or int(item) < 1:
            raise WorkshopError(
                f"{THREADS_BY_STEP}: {item.strip()!r} is not a thread count; allowed: integers >= 1, "
                f"comma-separated, one per step"
            )
        counts.append(int(item))
    return counts


class ThreadSchedule(TrainerCallback):
    """Before optimizer step k (1-based), the k-th count (the last one past the end); after it, the count
    on the step's record. Must come after MetricsCallback, which makes the record."""

    def __init__(self, counts: list[int], state: RunState):
        self.counts, self.state = counts, state

    def on_step_begin(self, args, st, control, **kw):
        import torch

        torch.set_num_threads(self.counts[min(st.global_step, len(self.counts) - 1)])

    def on_step_end(self, args, st, control, **kw):
        import torch

        if self.state.pending is not None:
            self.state.pending["threads"] = torch.get_num_threads()
