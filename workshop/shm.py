"""DeepSpeed's shared-memory collective buffers: one ~66 MB file per rank in /dev/shm (RAM), never unlinked by
DeepSpeed 0.19. Every process that starts DeepSpeed's process group releases its run's buffers when it ends,
however it ends; the launcher sweeps up after ranks that were killed."""

from __future__ import annotations

import os
from pathlib import Path

SHM_DIR = Path("/dev/shm")
SHM_GLOB = "deepspeed_allreduce_buffer_*"


def shm_buffer_prefix() -> str:
    """Name prefix of the shared-memory files DeepSpeed's CPU collective creates for this run (shm.cpp)."""
    return f"deepspeed_allreduce_buffer_{os.getuid()}_{os.environ.get('MASTER_ADDR')}_{os.environ.get('MASTER_PORT')}_"


def release_shm_buffers() -> int:
    """Unlink this run's DeepSpeed shared-memory buffers (one ~66 MB file per rank in /dev/shm).

    DeepSpeed 0.19 creates them when all ranks are on one host and never removes them: /dev/shm is RAM,
    so a day of runs fills the machine's memory. Unlinking removes only the name: a rank that still has a
    buffer mapped keeps it until it exits, so every rank may call this at its end, in any order.
    """
    removed = 0
    for path in SHM_DIR.glob(shm_buffer_prefix() + "*"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed
