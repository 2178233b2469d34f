"""DeepSpeed's op-compatibility probe, run once per process without printing linker errors.

`deepspeed.init_distributed` reads `deepspeed.ops.__compatible_ops__`, which compiles and links a test program
per op. The async_io probe fails to link `-laio` on machines without libaio (an op this workbook never uses).
DeepSpeed silences the linker by redirecting `sys.stderr.fileno()`, but in a Jupyter kernel that is not fd 2,
so `/usr/bin/ld: cannot find -laio` lands in the learner's cell output. Probing once here with the real file
descriptors sent to /dev/null fills DeepSpeed's cache, so later accesses print nothing.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path


def extensions_dir() -> Path:
    """Where DeepSpeed's JIT-built C++ ops are cached: `$TORCH_EXTENSIONS_DIR`, else one folder per DeepSpeed
    version. torch's default folder is shared by every version, so after an upgrade (0.19.7 -> 0.19.8, say)
    the old build is loaded and fails (`module 'deepspeed_shm_comm' has no attribute
    'vector_kernel_level'`)."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    if env:
        return Path(env)
    try:
        version = metadata.version("deepspeed")
    except metadata.PackageNotFoundError:
        version = "none"
    return Path.home() / ".cache" / "torch_extensions" / f"deepspeed-{version}"


def use_versioned_extensions_dir() -> Path:
    """Set TORCH_EXTENSIONS_DIR for this process and its children, before DeepSpeed builds or loads an op."""
    path = extensions_dir()
    os.environ["TORCH_EXTENSIONS_DIR"] = str(path)
    return path


def probe_deepspeed_ops() -> dict:
    import deepspeed.ops

    if "__compatible_ops__" in vars(deepspeed.ops):
        return deepspeed.ops.__compatible_ops__
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        return deepspeed.ops.__compatible_ops__
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
