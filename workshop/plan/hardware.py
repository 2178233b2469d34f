"""What this CPU can do for bf16 training: AMX detection, the kernel oneDNN really picks, measured GEMM
TFLOPS.

Why three separate answers: a CPU flag says the silicon has AMX, the kernel must also allow it (Linux >= 5.16
grants AMX tile state on request), and only oneDNN's own verbose line proves a bf16 matmul actually ran on
it. The benchmark then puts a number beside the theoretical peak, so "AMX gives 30-50 TFLOPS" becomes a
measured fraction of a stated formula. Nothing here assumes AMX is present.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import NotRequired, TypedDict

from workshop.errors import WorkshopError, check_positive
from workshop.lang import N_, _

# FLOPs per cycle per core for the matmul paths that matter here, with where each number comes from.
# A FLOP is a multiply or an add (an FMA is 2).
FLOPS_PER_CYCLE: dict[str, tuple[int, str]] = {
    "amx_bf16": (1024, "Intel AMX TMUL: 1,024 bf16 FLOP/cycle/core (Intel AMX overview, 4th gen Xeon)"),
    "avx512_bf16_intel": (
        128,
        "AVX512_BF16 VDPBF16PS: 32 pairs x 2 FLOP per 512-bit op x 2 FMA ports (Xeon)",
    ),
    "avx512_fp32_intel": (64, "AVX-512 FMA: 16 lanes x 2 FLOP x 2 FMA ports per core (Xeon)"),
    "avx512_bf16_zen4": (
        64,
        (
            "Zen 4 runs 512-bit ops on two 256-bit pipes: one VDPBF16PS zmm (64 FLOP) per"
            " cycle (AMD Zen 4 software optimization guide)"
        ),
    ),
    "avx512_fp32_zen4": (32, "Zen 4: one 512-bit FMA per cycle = 16 lanes x 2 FLOP (two 256-bit FMA pipes)"),
    "avx512_bf16_zen5": (128, "Zen 5 (EPYC 9005) has full 512-bit datapaths: two VDPBF16PS zmm per cycle"),
    "avx512_fp32_zen5": (64, "Zen 5: two 512-bit FMA per cycle = 2 x 16 lanes x 2 FLOP"),
    "avx2_fp32": (32, "AVX2 FMA: 8 lanes x 2 FLOP x 2 FMA ports"),
}
AMX_BF16_FLOP_PER_CYCLE = FLOPS_PER_CYCLE["amx_bf16"][0]  # the planner's and the catalog's CPU peak


class XeonReference(TypedDict):
    name: str
    clock_ghz: float
    clock_source: str


# The Xeon the chapter targets: r7i/m7i/c7i are Sapphire Rapids; EC2's catalog lists 3.2 GHz all-core turbo.
# Used for "the AMX peak of the same cores" only where this machine's clock is unknown (one machine, one
# clock).
XEON_REFERENCE: XeonReference = {
    "name": "r7i (Sapphire Rapids) all-core turbo",
    "clock_ghz": 3.2,
    "clock_source": N_("EC2 DescribeInstanceTypes ProcessorInfo.SustainedClockSpeedInGhz for r7i"),
}


def _read_proc_cpuinfo() -> dict[str, str]:
    """First processor block of /proc/cpuinfo as a dict (Linux); empty elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        if ":" in line:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    return info


def _clock_ghz(proc: dict[str, str], brand: str) -> tuple[float | None, str]:
    """The best clock we can justify, and where it came from (the peak formula is only as good as this)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as fh:
            khz = int(fh.read())
        return khz / 1e6, N_("/sys/.../cpufreq/cpuinfo_max_freq (max boost the kernel reports)")
    except (OSError, ValueError):
        pass
    m = re.search(r"@\s*([\d.]+)\s*GHz", brand)
    if m:
        return float(m.group(1)), N_("CPU brand string (nominal base clock)")
    if proc.get("cpu MHz"):
        return float(proc["cpu MHz"]) / 1000, N_("/proc/cpuinfo 'cpu MHz' (the clock the hypervisor reports)")
    try:
        import cpuinfo

        hz = cpuinfo.get_cpu_info().get("hz_advertised")
    except Exception:  # noqa: BLE001 - py-cpuinfo is a best-effort fallback
        hz = None
    if hz:
        return hz[0] / 1e9, N_("py-cpuinfo advertised clock")
    return None, N_("unknown (no cpufreq, brand string or /proc/cpuinfo clock)")


def physical_cores() -> int:
    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def threads_per_core() -> int | None:
    """Hardware threads per physical core as `lscpu` states it (2: each vCPU is a hyperthread, as on EC2);
    None where lscpu is missing or says nothing."""
    try:
        out = subprocess.run(
            ["lscpu"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^Thread\(s\) per core:\s*(\d+)", out, re.M)
    return int(m.group(1)) if m else None


def cores_sentence(physical: int, vcpus: int | None, per_core: int | None) -> str:
    """Physical cores against vCPUs in one sentence: the catalog counts cores, a VM shows vCPUs."""
    if per_core and per_core > 1:
        return _(
            "{vcpus} vCPUs on {cores} physical cores ({per} threads per core, lscpu): two vCPUs of one core "
            "share its matmul units, so count cores, not vCPUs"
        ).format(vcpus=vcpus, cores=physical, per=per_core)
    return _(
        "{vcpus} vCPUs on {cores} physical cores (1 thread per core, lscpu): each vCPU is a core"
    ).format(vcpus=vcpus, cores=physical)


_PROBE = """
import torch
a = torch.randn(128, 128, dtype=torch.bfloat16)
(a @ a).sum().item()
"""


class OneDnnDispatch(TypedDict):
    """What oneDNN printed for one bf16 matmul: its ISA line and the kernel (None: not seen or not probed)."""

    isa: str | None
    bf16_matmul_impl: str | None
    error: NotRequired[str]  # the probe process could not run
    note: NotRequired[str | None]  # why no kernel was seen


@lru_cache(maxsize=1)
def onednn_dispatch() -> OneDnnDispatch:
    """Run one bf16 matmul in a child process with ONEDNN_VERBOSE=1 and read what oneDNN chose.

    A child process because oneDNN reads the variable once at start-up and prints from C, past Python's
    stdout; the child's output is ours to parse.
    """
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "OMP_NUM_THREADS": "1"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"isa": None, "bf16_matmul_impl": None, "error": str(exc)}
    isa: str | None = None
    impl: str | None = None
    for line in out.splitlines():
        if ",info,cpu,isa:" in line:
            isa = line.split("isa:", 1)[1].strip()
        elif ",primitive,exec,cpu,matmul," in line or ",primitive,exec,cpu,inner_product," in line:
            impl = impl or line.split(",")[6]
    return {
        "isa": isa,
        "bf16_matmul_impl": impl,
        "note": None if impl else "no oneDNN matmul ran: this torch build routes bf16 GEMM elsewhere",
    }


class CpuFacts(TypedDict):
    """What `detect` reads off this machine before classifying it (what `isa_class` and `explain` read)."""

    cpu_model: str
    vendor: str
    arch: str
    cpu_family: int | None
    cores: int  # physical
    logical_cpus: int | None
    torch_threads: int
    clock_ghz: float | None
    clock_source: str  # where clock_ghz came from (the peak formula is only as good as it)
    amx_bf16: bool
    amx_tile: bool
    amx_int8: bool
    amx: bool  # amx_bf16 and amx_tile
    avx512f: bool
    avx512_bf16: bool
    avx2: bool
    onednn_isa: str | None
    onednn_bf16_impl: str | None
    onednn_uses_amx: bool | None  # None: oneDNN not probed
    torch_capability: str
    torch_version: str


class Detection(CpuFacts):
    """`detect()`'s record (chapter 01 prints it; JSON results keep it under "detect")."""

    isa_class: str  # see isa_class()
    why: str  # explain(): one sentence on what bf16 matmuls run on here


def detect(*, probe_onednn: bool = True) -> Detection:
    """AMX/bf16 flags, CPU identity, physical cores and clock in GHz (with its source), oneDNN's bf16 kernel,
    torch's ISA level: a Detection dict."""
    import torch

    proc = _read_proc_cpuinfo()
    flags = set(proc.get("flags", proc.get("Features", "")).split())
    brand = proc.get("model name", "") or platform.processor()
    vendor = proc.get("vendor_id", "") or platform.machine()
    if not flags:  # not Linux: py-cpuinfo knows more
        try:
            import cpuinfo

            info = cpuinfo.get_cpu_info()
        except Exception:  # noqa: BLE001 - best effort
            info = {}
        flags = set(info.get("flags", []))
        brand, vendor = info.get("brand_raw", brand), info.get("vendor_id_raw", vendor)
    clock, clock_source = _clock_ghz(proc, brand)
    amx = {f: f in flags for f in ("amx_bf16", "amx_tile", "amx_int8")}
    has_amx = amx["amx_bf16"] and amx["amx_tile"]
    family = int(proc["cpu family"]) if proc.get("cpu family", "").isdigit() else None
    onednn: OneDnnDispatch = onednn_dispatch() if probe_onednn else {"isa": None, "bf16_matmul_impl": None}
    impl = onednn.get("bf16_matmul_impl") or ""
    facts: CpuFacts = {
        "cpu_model": brand,
        "vendor": vendor,
        "arch": platform.machine(),
        "cpu_family": family,
        "cores": physical_cores(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "clock_ghz": round(clock, 3) if clock else None,
        "clock_source": clock_source,
        "amx_bf16": amx["amx_bf16"],
        "amx_tile": amx["amx_tile"],
        "amx_int8": amx["amx_int8"],
        "amx": has_amx,
        "avx512f": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "avx2": "avx2" in flags,
        "onednn_isa": onednn.get("isa"),
        "onednn_bf16_impl": onednn.get("bf16_matmul_impl"),
        "onednn_uses_amx": ("amx" in impl) if probe_onednn else None,  # None: not probed (cheap detection)
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_version": torch.__version__,
    }
    return {**facts, "isa_class": isa_class(facts), "why": explain(facts)}


def native_bf16() -> tuple[bool, str]:
    """Whether this host does bf16 math natively, and why: what precision "auto" decides on.

    A CUDA GPU, Intel AMX, AVX512_BF16 (Zen 4+, Cooper Lake+) or Arm's bf16 extension (Graviton 3+) multiply
    bf16 in hardware. Elsewhere (AVX2 laptops, Zen 3) bf16 is emulated by converting to fp32 and back, and
    a bf16 matmul runs tens of times slower than fp32: chapter 01 measures the ratio.
    """
    import torch

    if torch.cuda.is_available():
        return True, _("a CUDA GPU ({name}) computes bf16 natively").format(
            name=torch.cuda.get_device_name(0)
        )
    proc = _read_proc_cpuinfo()
    flags = set(proc.get("flags", proc.get("Features", "")).split())
    for flag, what in (
        ("amx_bf16", "Intel AMX"),
        ("avx512_bf16", "AVX512_BF16"),
        ("bf16", N_("Arm's bf16 extension")),
    ):
        if flag in flags:
            return True, _("this CPU has {what} (native bf16 math)").format(what=_(what))
    return False, _(
        "this CPU has no native bf16 math (no AMX, AVX512_BF16 or Arm bf16): bf16 would be emulated "
        "through fp32, many times slower"
    )


def has_cxx_compiler() -> bool:
    """torch.compile's Inductor builds its CPU kernels with a C++ compiler; without one, only eager mode
    runs."""
    import shutil

    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))


def resolve_precision(precision: str) -> tuple[str, str]:
    """("bf16" | "fp32", the reason): "auto" becomes bf16 where the hardware multiplies bf16 natively."""
    if precision != "auto":
        return precision, _("{precision} as asked").format(precision=precision)
    native, why = native_bf16()
    return ("bf16" if native else "fp32"), _("auto: {why}").format(why=why)


def isa_class(d: CpuFacts) -> str:
    """Which FLOPS_PER_CYCLE rows apply: 'intel_amx', 'intel_avx512', 'zen4', 'zen5', 'avx2' or 'other'."""
    if d.get("amx"):
        return "intel_amx"
    amd = "AMD" in (d.get("vendor") or "") or "AMD" in (d.get("cpu_model") or "")
    if d.get("avx512f"):
        if amd:
            return "zen5" if (d.get("cpu_family") or 0) >= 26 else "zen4"
        return "intel_avx512"
    return "avx2" if d.get("avx2") else "other"


def explain(d: CpuFacts) -> str:
    """One sentence (str) a learner can act on: what bf16 matmuls run on here, and why."""
    if d["amx"]:
        if d.get("onednn_uses_amx") is None:  # not probed: say nothing about oneDNN rather than guess
            return _(
                "AMX present (amx_bf16, amx_tile): bf16 matmuls can run on its tile unit "
                "(`python -m workshop hw` shows which oneDNN kernel really runs them)."
            )
        used = (
            _("and oneDNN dispatches bf16 matmuls to it")
            if d.get("onednn_uses_amx")
            else _("but oneDNN did not pick an AMX kernel (check the kernel >= 5.16 and the torch build)")
        )
        return _("AMX present (amx_bf16, amx_tile) {used}: {kernel}.").format(
            used=used, kernel=d.get("onednn_bf16_impl")
        )
    vendor = d.get("vendor") or "this CPU"
    if d["arch"] in ("aarch64", "arm64"):
        why = _("an Arm CPU (e.g. Graviton): AMX is an Intel x86 extension")
    elif "AMD" in vendor:
        why = _("an AMD CPU: AMD implements AVX-512 (Zen 4+) but not AMX")
    else:
        why = _("an x86 CPU older than 4th gen Xeon (Sapphire Rapids), or a VM/kernel that hides AMX")
    path = (
        _("avx512_bf16 dot products")
        if d.get("avx512_bf16")
        else _("fp32 FMA units (bf16 is converted, no native bf16 math)")
    )
    if d.get("onednn_bf16_impl") is None:  # not probed: name no kernel rather than print None
        return _("No AMX: {why}. bf16 matmuls run on {path}.").format(why=why, path=path)
    return _("No AMX: {why}. bf16 matmuls run on {path}; oneDNN kernel: {kernel}.").format(
        why=why, path=path, kernel=d.get("onednn_bf16_impl")
    )


@dataclass
class Peak:
    """Theoretical peak = cores x clock x FLOP/cycle/core, with every factor named."""

    label: str
    path: str
    cores: int
    clock_ghz: float
    flops_per_cycle: int
    tflops: float
    assumption: str


def peak_tflops(path: str, cores: int, clock_ghz: float) -> Peak:
    """Peak TFLOPS of one matmul path (a FLOPS_PER_CYCLE key) on `cores` cores at `clock_ghz`."""
    if path not in FLOPS_PER_CYCLE:
        raise WorkshopError(f"unknown matmul path {path!r}; allowed: {', '.join(FLOPS_PER_CYCLE)}")
    check_positive("cores", cores)
    check_positive("clock_ghz", clock_ghz)
    fpc, why = FLOPS_PER_CYCLE[path]
    return Peak(path, path, cores, clock_ghz, fpc, cores * clock_ghz * 1e9 * fpc / 1e12, why)


class MachinePeaks(TypedDict):
    """Peaks of the matmul paths found here (None: no clock known, or no such path), and AMX's beside."""

    bf16: Peak | None
    fp32: Peak | None
    amx_reference: Peak  # the same cores with AMX at this machine's clock (XEON_REFERENCE's if unknown)


def machine_peaks(d: Detection, cores: int | None = None) -> MachinePeaks:
    """bf16 and fp32 peaks for the ISA found here, plus the AMX peak this many cores would have on a Xeon."""
    cores = cores or d["cores"]
    clock = d.get("clock_ghz")
    cls = d.get("isa_class") or isa_class(d)
    bf16_path = {
        "intel_amx": "amx_bf16",
        "zen4": "avx512_bf16_zen4",
        "zen5": "avx512_bf16_zen5",
        "intel_avx512": "avx512_bf16_intel",
    }.get(cls)
    if bf16_path and bf16_path.startswith("avx512_bf16") and not d.get("avx512_bf16"):
        bf16_path = None  # AVX-512 without bf16 dot products: bf16 runs through fp32 units
    fp32_path = {
        "intel_amx": "avx512_fp32_intel",
        "intel_avx512": "avx512_fp32_intel",
        "zen4": "avx512_fp32_zen4",
        "zen5": "avx512_fp32_zen5",
        "avx2": "avx2_fp32",
    }.get(cls)
    bf16: Peak | None = None
    fp32: Peak | None = None
    if clock:
        fp32 = peak_tflops(fp32_path, cores, clock) if fp32_path else None
        bf16 = peak_tflops(bf16_path, cores, clock) if bf16_path else fp32
    # What the same cores would peak at with AMX, at THIS machine's clock: one clock per machine, so "% of
    # this CPU's bf16 peak" and "% of the AMX peak" differ only by FLOP/cycle (on an AMX Xeon they are one
    # number). The Xeon reference clock stands in only where no clock is known.
    amx_reference = peak_tflops("amx_bf16", cores, clock or XEON_REFERENCE["clock_ghz"])
    return {"bf16": bf16, "fp32": fp32, "amx_reference": amx_reference}
