"""Which cores a rank runs on: its own block, set inside the rank before torch starts OpenMP."""

from __future__ import annotations

import os

from workshop.errors import WorkshopError, check_positive


def rank_cores(local_rank: int, local_world: int, threads: int | None, available: list[int]) -> list[int]:
    """The cores one rank is pinned to: its own consecutive block of `threads` cores (or an equal share).

    Ranks on one host otherwise let the scheduler move their OpenMP threads across each other's cores; a
    block per rank keeps each rank's caches its own. Refuses a layout that does not fit the cores it may use.
    """
    check_positive("local_world", local_world)
    per = threads or max(1, len(available) // local_world)
    if not 0 <= local_rank < local_world:
        raise WorkshopError(f"local rank {local_rank} is outside 0..{local_world - 1}")
    if per * local_world > len(available):
        raise WorkshopError(
            f"pinning {local_world} ranks x {per} threads needs {per * local_world} cores, this "
            f"process may use {len(available)} ({sorted(available)}); allowed threads per rank: "
            f"1..{max(1, len(available) // local_world)}"
        )
    cores = sorted(available)
    return cores[local_rank * per : (local_rank + 1) * per]


def pin_rank(threads: int | None) -> list[int]:
    """Pin this process (a torchrun rank: LOCAL_RANK, LOCAL_WORLD_SIZE) to its rank_cores, and bind its OpenMP
    threads there (OMP_PROC_BIND=close, OMP_PLACES=cores) before torch loads OpenMP; returns the cores.

    The binding is set here, in the rank, not in the launcher's environment: torchrun imports torch too, and
    an OMP_PROC_BIND it inherits binds torchrun's own thread to one core, which every rank then inherits.
    """
    cores = rank_cores(
        int(os.environ.get("LOCAL_RANK", "0")),
        int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        threads,
        list(os.sched_getaffinity(0)),
    )
    os.sched_setaffinity(0, cores)
    os.environ.setdefault("OMP_PROC_BIND", "close")
    os.environ.setdefault("OMP_PLACES", "cores")
    return cores
