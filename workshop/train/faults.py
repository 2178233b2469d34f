"""Fault injection for the fault tests: a rank that kills itself, raises, or hangs after a given step, so the
launchers' failure paths (the failing rank named, a hang stopped by its watchdog) are tested on real runs.
"""

from __future__ import annotations

import os
import time

FAULT_VARIABLES = (("WORKSHOP_KILL_AT", "kill"), ("WORKSHOP_RAISE_AT", "raise"), ("WORKSHOP_HANG_AT", "hang"))


def inject_faults() -> None:
    """WORKSHOP_KILL_AT / _RAISE_AT / _HANG_AT="RANK:STEP": that rank SIGKILLs itself, raises, or goes silent
    after STEP steps (the fault tests use them: a killed rank, a rank whose exception must be shown, a
    hang)."""
    for var, action in FAULT_VARIABLES:
        if os.environ.get(var):
            rank, _, step = os.environ[var].partition(":")
            _fault_at(rank, step, action)


def _fault_at(rank_s: str, step_s: str, action: str) -> None:
    if int(os.environ["RANK"]) != int(rank_s):
        return
    from transformers import trainer as hf_trainer

    original = hf_trainer.Trainer._maybe_log_save_evaluate

    def wrapped(self, *a, **kw):
        result = original(self, *a, **kw)
        if self.state.global_step >= int(step_s):
            _fail(action, rank_s, self.state.global_step)
        return result

    hf_trainer.Trainer._maybe_log_save_evaluate = wrapped


def _fail(action: str, rank_s: str, step: int) -> None:
    if action == "kill":
        import signal

        print(f"workshop.train: fault injection, rank {rank_s} kills itself at step {step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "hang":  # silent, like a rank stuck in a collective: only a watchdog can stop it
        print(f"workshop.train: fault injection, rank {rank_s} hangs at step {step}", flush=True)
        time.sleep(10**6)
    raise RuntimeError(f"fault injection: rank {rank_s} raised at step {step}")
