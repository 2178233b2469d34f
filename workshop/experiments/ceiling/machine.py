"""The machine every ceiling number depends on: CPU, ISA path, BLAS, versions, and the nominal peaks."""

from __future__ import annotations

import platform
import time

from workshop.errors import (
    WorkshopError,
    check_positive,
)
from workshop.experiments.ceiling.config import CeilingConfig
from workshop.experiments.measure import (
    peaks_for,
)
from workshop.plan import hardware, rates
from workshop.train.guard import versions


def gpu_peak(name: str, override: float | None = None) -> dict:
    """The bf16 dense peak of one GPU, in TFLOP/s, by the name the driver reports (plan.rates.GPUS, from the
    data sheets), or the --peak-tflops given; an unknown name must be given one."""
    if override:
        check_positive("peak-tflops", override)
        return {"gpu": name, "bf16_tflops": override, "source": "--peak-tflops"}
    spec = rates.gpu_by_device_name(name)
    if spec is None:
        raise WorkshopError(
            f"no bf16 peak known for GPU {name!r}; known: {', '.join(rates.GPUS)}; pass --peak-tflops"
        )
    return {"gpu": name, "bf16_tflops": spec.bf16_tflops, "source": spec.source}


def isa_path(d: dict, precision: str) -> str:
    """The matmul path this precision takes on this CPU: AMX-bf16, AVX512_BF16, AVX512-fp32, AVX2-fp32, ..."""
    if precision == "bf16":
        if d.get("amx"):
            return "AMX-bf16"
        if d.get("avx512_bf16"):
            return "AVX512_BF16"
        return (
            "bf16 emulated through fp32 ("
            + ("AVX512" if d.get("avx512f") else "AVX2" if d.get("avx2") else "scalar")
            + ")"
        )
    return "AVX512-fp32" if d.get("avx512f") else "AVX2-fp32" if d.get("avx2") else f"{d.get('arch')}-fp32"


def blas_info() -> str | None:
    """What torch's build uses for fp32 GEMM (BLAS_INFO in torch.__config__.show(): mkl, openblas, ...)."""
    import torch

    for part in torch.__config__.show().replace("\n", ",").split(","):
        if "BLAS_INFO=" in part:
            return part.split("=", 1)[1].strip()
    return None


def machine(device: str) -> dict:
    """CPU model, ISA flags, the oneDNN probe and library versions: what every number here depends on."""

    d = hardware.detect(probe_onednn=device == "cpu")
    native, why = hardware.native_bf16()
    out = {
        k: d.get(k)
        for k in (
            "cpu_model",
            "vendor",
            "arch",
            "cores",
            "logical_cpus",
            "clock_ghz",
            "clock_source",
            "isa_class",
            "torch_capability",
            "onednn_isa",
            "onednn_bf16_impl",
        )
    }
    out.update(
        isa_flags={k: d.get(k) for k in ("amx", "avx512f", "avx512_bf16", "avx2")},
        native_bf16=native,
        native_bf16_why=why,
        why=d.get("why"),
        blas=blas_info(),
        python=platform.python_version(),
        date=time.strftime("%Y-%m-%d"),
        versions=versions(),
    )
    if device == "cuda":
        import torch

        out["gpu"] = torch.cuda.get_device_name(0)
        out["gpus"] = torch.cuda.device_count()
    return out


def device_peaks(cfg: CeilingConfig, mach: dict) -> dict:
    """The nominal peak of the cores (or GPUs) the ranks use, per precision."""
    if cfg.device == "cuda":
        g = gpu_peak(mach.get("gpu", ""), cfg.peak_tflops)
        return {
            "bf16_tflops": g["bf16_tflops"] * cfg.nproc,
            "fp32_tflops": None,
            "source": g["source"],
            "per_gpu": g,
        }
    p = peaks_for(cfg.nproc * (cfg.threads or 1))
    return {
        k: p[k]
        for k in (
            "cores",
            "clock_ghz",
            "bf16_tflops",
            "bf16_path",
            "fp32_tflops",
            "fp32_path",
            "amx_bf16_tflops",
        )
    }
