"""Which malloc the ranks allocate through: glibc's, or a caching allocator preloaded into every rank.

A training step frees and reallocates the same large buffers every step; which allocator keeps them is a lever
chapter 04 measures, so it is chosen here once, by name, for the launcher and the benchmarks alike."""

import os
from pathlib import Path

from workshop.errors import WorkshopError, check_choice

ALLOCATORS = ("system", "auto", "tcmalloc", "jemalloc")
# Intel's PyTorch CPU tuning guide settings for jemalloc: keep freed pages instead of returning them each
# step.
JEMALLOC_CONF = (
    "oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:9000000000,"
    "muzzy_decay_ms:9000000000"
)
_ALLOCATOR_LIBS = {
    "tcmalloc": ("tcmalloc_minimal", "libtcmalloc-minimal4"),
    "jemalloc": ("jemalloc", "libjemalloc2"),
}


def allocator_path(name: str) -> str | None:
    """The shared library to LD_PRELOAD for tcmalloc or jemalloc, if installed (conda's lib, or ldconfig's
    cache)."""
    import ctypes.util

    lib = _ALLOCATOR_LIBS[name][0]
    prefix = os.environ.get("CONDA_PREFIX")
    if prefix and (Path(prefix) / "lib" / f"lib{lib}.so").exists():
        return str(Path(prefix) / "lib" / f"lib{lib}.so")
    return ctypes.util.find_library(lib) or (
        ctypes.util.find_library("tcmalloc") if name == "tcmalloc" else None
    )


def allocator_env(name: str) -> tuple[dict, str]:
    """The rank environment that makes every rank (and torchrun) allocate through `name`, and what was chosen.

    A training step frees and reallocates the same large buffers every step; glibc's malloc hands big ones
    back to the kernel and faults them in again, a caching allocator keeps them. `auto` takes tcmalloc where
    it is installed (torch.backends.xeon.run_cpu prefers it too) and glibc's otherwise; a named one must be
    installed.
    """
    check_choice("allocator", name, ALLOCATORS)
    if name == "system":
        return {}, "system"
    if name == "auto":
        return allocator_env("tcmalloc") if allocator_path("tcmalloc") else ({}, "system")
    path = allocator_path(name)
    if path is None:
        pkg = _ALLOCATOR_LIBS[name][1]
        raise WorkshopError(
            f"allocator {name} is not installed (apt-get install {pkg}); allowed here: "
            + ", ".join(a for a in ALLOCATORS if a in ("system", "auto") or allocator_path(a))
        )
    env = {"LD_PRELOAD": ":".join(p for p in (path, os.environ.get("LD_PRELOAD")) if p)}
    if name == "jemalloc":
        env["MALLOC_CONF"] = JEMALLOC_CONF
    return env, name
