"""The CPU rate's calibration: a ceiling.json (`workshop bench ceiling`) or slice.json (`workshop bench
slice`) read and checked before any plan is priced with it, and the measured CPU rates drawn from it (the
step's share of its CPU's own peak, the measuring host's clock, the thread scaling). Kept apart from
workshop.plan.rates because a calibration file is learner input: every way it can be wrong is one error
naming the file and the key."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.lang import N_, _
from workshop.plan.rates import CPU_ENGINES, Rate, read_measured

SLICE_ENGINES = ("deepspeed",)  # `workshop bench slice` trains the job's engine only
SLICE_JSON = "slice.json"  # benchmarks/results/: the slice, and the thread-scaling curve measured with it
MIN_STEP_SHARE = 1e-4  # a training step below 0.01 % of its peak is a broken file, not a measurement
MAX_CLOCK_GHZ = 6.0  # no server CPU core runs faster (the fastest boost clocks are ~5.7 GHz)
THREAD_SCALING_CORES = 96  # the host the planner's thread scaling is quoted for (a 48xlarge's cores)
# A GEMM ceiling that moves more than this while it is measured means other work shared the cores: the bench
# then gives a range, not a share (report.verdict), and the planner refuses to price plans with it (one rule)
DRIFT_BOUND_PCT = 10.0


def ceiling_moved_pct(samples: list[float]) -> float:
    """How far a GEMM ceiling moved while it was measured: (max - min) / min, in %."""
    return 100 * (max(samples) - min(samples)) / min(samples)


def _number(path: str, where: str, value: object, *, low: float = 0.0) -> float:
    """A positive finite number from a calibration file, or one error naming the file and the key."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= low
    ):
        raise WorkshopError(f"{path}: {where} must be a number > {low:g}, got {value!r}")
    return float(value)


def _key(path: str, record: object, *keys: str) -> object:
    node = record
    for i, k in enumerate(keys):
        if not isinstance(node, dict) or k not in node:
            raise WorkshopError(
                f"{path}: missing key {'.'.join(keys[: i + 1])!r}; expected a ceiling.json "
                "(`workshop bench ceiling`) or a slice.json (`workshop bench slice`)"
            )
        node = node[k]
    return node


@dataclass(frozen=True)
class Calibration:
    """A validated CPU calibration: a training step's model FLOP rate as a share of the measuring CPU's own
    peak (one clock, named), where it came from, and whether that peak is AMX's. `compute_share` is the
    share over the step's compute alone (a slice's forward+backward less its gradient reduce, from
    DeepSpeed's timers): the planner adds collectives and the optimizer itself, so pricing with the
    whole-step `share` would count them twice. `ceiling_share` is the same compute rate over the measuring
    machine's GEMM ceiling at its shapes: what carries to another matmul path (AMX)."""

    share: float  # of `peak_tflops`, the whole step
    peak_tflops: float
    peak_path: str
    clock_ghz: float
    amx: bool
    cpu_model: str
    date: str
    shape: str  # what was trained, in words
    kind: str  # "ceiling" | "slice"
    path: str
    compute_share: float = 0.0  # of `peak_tflops`, compute alone (0: not separated; the whole step's)
    ceiling_share: float = 0.0  # compute rate over the measuring machine's GEMM ceiling at its shapes
    compute_why: str = ""  # how the compute time was told apart from the rest of the step, in words

    @property
    def step_share(self) -> float:
        """The share the planner's compute term uses: compute alone where it was measured apart."""
        return self.compute_share or self.share


def _read_calibration(path: str | None, engine: str) -> tuple[str, dict]:
    # the stored one, named as the repository names it: the slice for the job's engine (ZeRO-3 on the 8B
    # shape), chapter 04's ceiling levers for the others (a slice trains deepspeed only)
    stored = SLICE_JSON if engine in SLICE_ENGINES else "ceiling.json"
    where = path or f"benchmarks/results/{stored}"
    if path is None:
        return where, read_measured(stored)
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise WorkshopError(f"{path}: cannot read a calibration file ({exc})") from None
    return where, data


def calibration(path: str | None = None, engine: str = "deepspeed") -> Calibration:
    """The CPU calibration a plan is priced with, checked before it is used: a JSON object of the shape
    `bench ceiling` or `bench slice` writes, positive finite numbers in their units (GHz, TFLOPS, %), and a
    training step at no more than its CPU's own peak (cores x clock x FLOP/cycle)."""
    from workshop.plan.hardware import FLOPS_PER_CYCLE

    if engine not in CPU_ENGINES:
        raise WorkshopError(f"CPU engine {engine!r}: choose one of {', '.join(CPU_ENGINES)}")
    where, data = _read_calibration(path, engine)
    if not isinstance(data, dict):
        raise WorkshopError(
            f"{where}: expected a JSON object (a ceiling.json or slice.json), got a {type(data).__name__}"
        )
    mach = _key(where, data, "machine")
    clock = _number(where, "machine.clock_ghz (GHz)", _key(where, data, "machine", "clock_ghz"))
    if clock > MAX_CLOCK_GHZ:
        raise WorkshopError(
            f"{where}: machine.clock_ghz {clock:g} GHz is above any server CPU's ({MAX_CLOCK_GHZ:g} GHz); "
            "the clock prices every CPU plan, so it must be the measuring host's"
        )
    cpu = str(_key(where, data, "machine", "cpu_model"))
    date = str(_key(where, data, "machine", "date"))
    amx = bool(isinstance(mach, dict) and mach.get("isa_flags", {}).get("amx"))
    split: tuple[float, float, str] = (0.0, 0.0, "")
    if data.get("benchmark") == "slice":
        share, peak, path_name, shape = _slice_step(where, data, engine)
        split = _slice_compute(where, data, share, peak)
        kind = "slice"
    else:
        share, peak, path_name, shape = _ceiling_step(where, data, engine)
        split = _ceiling_whole_step(where, data, engine)
        kind = "ceiling"
    _check_ceiling_held(where, data, engine, kind)
    if share < MIN_STEP_SHARE:
        raise WorkshopError(
            f"{where}: a step at {share:.3g} of its peak is not a measurement (below {MIN_STEP_SHARE:g}); "
            "re-measure it"
        )
    if split[0] > 1:
        raise WorkshopError(
            f"{where}: its compute alone claims {split[0]:.0%} of {cpu}'s peak ({peak:g} TFLOPS at "
            f"{clock:g} GHz): compute cannot beat its CPU's peak; the step split or the clock is wrong"
        )
    if share > 1:
        raise WorkshopError(
            f"{where}: claims {share:.0%} of {cpu}'s peak ({peak:g} TFLOPS at {clock:g} GHz): a training "
            "step "
            "cannot beat its CPU's peak; the file is wrong or its clock is understated"
        )
    fpc = FLOPS_PER_CYCLE.get(path_name)
    cores = _number(where, "machine.cores", _key(where, data, "machine", "cores"))
    if fpc and peak > 1.001 * cores * clock * fpc[0] / 1000:
        raise WorkshopError(
            f"{where}: a peak of {peak:g} TFLOPS is above {int(cores)} cores x {clock:g} GHz x {fpc[0]} "
            f"FLOP/cycle ({path_name}) = {cores * clock * fpc[0] / 1000:.3g} TFLOPS"
        )
    return Calibration(share, peak, path_name, clock, amx, cpu, date, shape, kind, where, *split)


def _check_ceiling_held(where: str, data: dict, engine: str, kind: str) -> None:
    """The GEMM ceiling measured around the calibrating run held within DRIFT_BOUND_PCT, or one error: a
    ceiling that moved means the cores were shared, and the share the planner would price with is a range."""
    if kind == "slice":
        samples, key = data.get("ceiling_tflops"), "ceiling_tflops"
    else:
        rec = data["levers"][CPU_ENGINES[engine]]
        samples = (rec.get("ceiling_tflops") or {}).get("values")
        key = f"levers.{CPU_ENGINES[engine]}.ceiling_tflops.values"
    if not isinstance(samples, list) or len(samples) < 2:
        return  # one probe (or none): nothing moved that can be seen; the file's other checks still hold
    xs = [_number(where, f"{key} (TFLOPS)", x) for x in samples]
    moved = ceiling_moved_pct(xs)
    if moved > DRIFT_BOUND_PCT:
        raise WorkshopError(
            f"{where}: its GEMM ceiling moved {moved:.0f}% while it was measured "
            f"({min(xs):.4g}-{max(xs):.4g} TFLOPS), more than the {DRIFT_BOUND_PCT:g}% this workbook "
            "trusts (other work on its cores, or their clock fell under the run's load), so no single share "
            "can be read from it; re-measure on an idle machine"
        )


def _slice_step(where: str, data: dict, engine: str) -> tuple[float, float, str, str]:
    """A slice.json's (share of peak, peak TFLOPS, peak path, shape in words)."""
    if engine not in SLICE_ENGINES:
        raise WorkshopError(f"{where}: a slice measures engine deepspeed (ZeRO-3), not {engine!r}")
    tflops = _number(where, "model_tflops.median (TFLOPS)", _key(where, data, "model_tflops", "median"))
    peak = _number(where, "peak.tflops (TFLOPS)", _key(where, data, "peak", "tflops"))
    path_name = str(_key(where, data, "peak", "path"))
    return tflops / peak, peak, path_name, slice_shape(_key(where, data, "shape"))


def slice_shape(sh: object) -> str:
    """A slice's shape in words (slice.json's "shape")."""
    keys = ("layers", "vocab", "seq_len", "micro_batch", "ranks", "threads")
    if not (isinstance(sh, dict) and all(k in sh for k in keys)):
        return "Llama-3-8B slice"
    return (
        f"Llama-3-8B slice: {sh['layers']} layer(s), vocab {sh['vocab']:,}, seq {sh['seq_len']}, "
        f"micro-batch {sh['micro_batch']}, {sh['ranks']} ranks x {sh['threads']} thread(s)"
    )


def _slice_compute(where: str, data: dict, share: float, peak: float) -> tuple[float, float, str]:
    """A slice.json's (compute share of peak, compute share of its GEMM ceiling, how): the step's compute
    time is forward+backward less the gradient reduce (DeepSpeed's timers, rank 0; ZeRO-3's parameter
    gathers stay inside, untimed, so on one host the planner does not add them again:
    estimate.gathers_in_cpu_rate). No timers: (0, 0, why), and the whole step stands for compute."""
    split = data.get("step_split")
    if not isinstance(split, dict) or not split.get("measured"):
        return 0.0, 0.0, "no step split stored: the whole step stands for compute"
    fb = _number(where, "step_split.forward_backward_s (s)", split.get("forward_backward_s"))
    reduce = split.get("allreduce_s") or 0.0
    reduce = _number(where, "step_split.allreduce_s (s)", reduce, low=-1.0) if reduce else 0.0
    step = _number(where, "step_s.median (s)", _key(where, data, "step_s", "median"))
    if not reduce < fb <= 1.05 * step:
        raise WorkshopError(
            f"{where}: step_split forward+backward {fb:g} s less the reduce {reduce:g} s must be a positive "
            f"part of the {step:g} s step"
        )
    compute_share = share * step / (fb - reduce)
    ceilings = data.get("ceiling_tflops")
    ceiling_share = 0.0
    if isinstance(ceilings, list) and ceilings:
        for x in ceilings:
            _number(where, "ceiling_tflops (TFLOPS)", x)
        ceiling = statistics.median(ceilings)
        tflops = _number(where, "model_tflops.median (TFLOPS)", data["model_tflops"]["median"])
        ceiling_share = tflops * step / (fb - reduce) / ceiling
    how = _(
        "compute = forward+backward {fb:.2f} s less the gradient reduce {reduce:.2f} s of the {step:.2f} s "
        "step (DeepSpeed's timers, rank 0)"
    ).format(fb=fb, reduce=reduce, step=step)
    return compute_share, ceiling_share, how


def _ceiling_whole_step(where: str, data: dict, engine: str) -> tuple[float, float, str]:
    """A ceiling.json's lever has no step split: (0: the whole step's share of peak, its share of the GEMM
    ceiling, why); its collectives and optimizer stay inside the share the planner prices compute with."""
    rec = data["levers"][CPU_ENGINES[engine]]
    pct = rec.get("pct_of_ceiling", {}).get("median") if isinstance(rec, dict) else None
    ceiling_share = _number(where, "pct_of_ceiling.median (%)", pct) / 100 if pct is not None else 0.0
    return 0.0, ceiling_share, "a whole step: no split stored, its collectives and optimizer inside"


def _ceiling_step(where: str, data: dict, engine: str) -> tuple[float, float, str, str]:
    """A ceiling.json's (share of peak, peak TFLOPS, peak path, shape in words), from the engine's lever."""
    lever = CPU_ENGINES[engine]
    rec = _key(where, data, "levers", lever)
    if not isinstance(rec, dict) or rec.get("status") != "measured":
        raise WorkshopError(
            f"{where}: no measured '{lever}' lever for engine {engine!r} "
            f"(measure it: python -m workshop bench ceiling --levers no_compile,{lever})"
        )
    pct = _number(
        where, f"levers.{lever}.mfu_pct_of_peak.median (%)", _key(where, rec, "mfu_pct_of_peak", "median")
    )
    peak = _number(where, "peaks.bf16_tflops (TFLOPS)", _key(where, data, "peaks", "bf16_tflops"))
    path_name = str(_key(where, data, "peaks", "bf16_path"))
    cfg = _key(where, data, "config")
    shape = (
        f"model {cfg.get('model')}, seq {cfg.get('seq_len')}, micro-batch {cfg.get('micro_batch')}, "
        f"{cfg.get('nproc')} ranks x {cfg.get('threads')} thread(s)"
        if isinstance(cfg, dict)
        else "?"
    )
    return pct / 100, peak, path_name, shape


def cpu_clock_basis(path: str | None = None, engine: str = "deepspeed") -> Rate:
    """The clock of the AMX peak the CPU rate is a share of: the measuring host's when it has AMX, else
    the AMX host whose GEMM ceiling carried the rate there (cpu_efficiency); never the catalog's, so the
    share and the peak it multiplies stand on one clock."""
    c = calibration(path, engine)
    if c.amx:
        return Rate(
            c.clock_ghz,
            N_("GHz"),
            N_("measured"),
            _("the clock of the host the CPU rate was measured on ({cpu}, {date}; {path})").format(
                cpu=c.cpu_model, date=c.date, path=c.path
            ),
        )
    amx = amx_gemm_ceiling()
    return Rate(
        amx.clock_ghz,
        N_("GHz"),
        N_("measured"),
        _("the clock of the AMX host whose GEMM ceiling carries the CPU rate to AMX ({source})").format(
            source=amx.source
        ),
    )


AMX_CURVE_JSON = "device-amx16-h100-2026-11-26.json"  # a 16-core AMX Xeon's GEMMs at 1, 2, 4, 8, 16 threads


def stored_thread_curve() -> tuple[dict | None, str]:
    """The thread-scaling curve the planner prices AMX hosts with, and where it was measured: the AMX host's
    GEMMs (device-amx16-h100-2026-11-26.json) first, else a slice.json measured on AMX; None: no AMX curve
    stored (a curve from a CPU without AMX says nothing about AMX's units)."""
    from workshop.plan.scaling import curve_from_gemm_cells

    try:
        dev = read_measured(AMX_CURVE_JSON)
        curve = curve_from_gemm_cells(dev["cpu"]["gemm"])
        det = dev["machine"]["detect"]
        if curve and det.get("amx"):
            return dict(curve), _("{path}: {cpu} with AMX, {cores} cores at {clock} GHz").format(
                path=AMX_CURVE_JSON, cpu=det["cpu_model"], cores=det["cores"], clock=det["clock_ghz"]
            )
    except (WorkshopError, KeyError, TypeError):
        pass
    try:
        sl = read_measured(SLICE_JSON)
        if sl.get("machine", {}).get("isa_flags", {}).get("amx") and sl.get("thread_curve"):
            return sl["thread_curve"], f"{SLICE_JSON}: {sl['machine']['cpu_model']}, {sl['machine']['date']}"
    except WorkshopError:
        pass
    return None, "no AMX thread curve stored"


def cpu_thread_scaling(
    cores: int = THREAD_SCALING_CORES, curve: dict | None = None
) -> tuple[Rate, tuple[float, float]]:
    """The per-core share a rank keeps on `cores` cores against the 1 thread per rank the rate was measured
    at: the measured GEMM thread curve (slice.json's), extrapolated by its power law, with the range its
    repeats allow. Without a stored curve: the old stated assumption, said so."""
    from workshop.plan.scaling import scaling_at

    where = "given"
    if curve is None:
        curve, where = stored_thread_curve()
    if not curve:
        return Rate(
            0.5,
            N_("of linear scaling"),
            N_("assumption"),
            _("{where}: half of linear assumed").format(where=where),
        ), (0.25, 1.0)
    sc = scaling_at(curve, cores)
    return Rate(
        sc.value,
        N_("of linear scaling"),
        N_("measured"),
        _("bf16 GEMM {shape} at 1..{most} threads ({where}): {how}").format(
            shape="x".join(map(str, curve.get("shape", []))),
            most=sc.measured_up_to,
            where=where,
            how=sc.describe(),
        ),
    ), (sc.low, sc.high)


def carried_share(
    ceiling_tflops: float, peak_tflops: float, engine: str = "deepspeed", path: str | None = None
) -> Rate:
    """The CPU rate carried to a machine whose GEMM ceiling at the job's shapes was just measured: the
    calibration's compute share of its own GEMM ceiling x this ceiling, as a share of this machine's peak
    (the method cpu_efficiency carries a rate to AMX with)."""
    c = calibration(path, engine)
    if not c.ceiling_share:
        raise WorkshopError(f"{c.path}: no GEMM ceiling stored, so its rate cannot be carried to this CPU")
    return Rate(
        c.ceiling_share * ceiling_tflops / peak_tflops,
        N_("of the CPU's bf16 peak"),
        N_("measured"),
        _(
            "the {kind} step's compute ran at {share:.0%} of its own GEMM ceiling ({shape}; {cpu}, {date}; "
            "{how}; {path}) x this machine's GEMM ceiling {ceiling:.3f} TFLOPS over its peak {peak:.3f}"
        ).format(
            kind=c.kind, share=c.ceiling_share, shape=c.shape, cpu=c.cpu_model, date=c.date,
            how=c.compute_why, path=c.path, ceiling=ceiling_tflops, peak=peak_tflops,
        ),
    )  # fmt: skip


def cpu_step_share(engine: str = "deepspeed", path: str | None = None) -> Rate:
    """A training step's model FLOP rate as a share of the measuring CPU's own peak (its matmul path, its
    clock), before any thread scaling: what `workshop bench slice` applies to this machine's own peak."""
    c = calibration(path, engine)
    return Rate(
        c.share,
        N_("of the CPU's bf16 peak"),
        N_("measured"),
        f"{c.kind} step = {c.share:.1%} of the {c.peak_tflops:.3g} TFLOPS {c.peak_path} peak at "
        f"{c.clock_ghz:g} GHz ({c.shape}; {c.cpu_model}, {c.date}; {c.path})",
    )


@dataclass(frozen=True)
class AmxCeiling:
    """One AMX core's measured bf16 GEMM rate (1 thread, the largest square stored) as a share of its
    peak at its host's clock: what a compute share of another machine's GEMM ceiling is carried with."""

    share: float  # of clock x AMX FLOP/cycle
    tflops: float
    clock_ghz: float
    source: str


def amx_gemm_ceiling() -> AmxCeiling:
    """The stored AMX host's 1-thread bf16 GEMM (device-amx16-h100-2026-11-26.json) over one core's AMX peak
    at that host's clock."""
    from workshop.plan.hardware import AMX_BF16_FLOP_PER_CYCLE
    from workshop.plan.scaling import curve_from_gemm_cells

    try:
        dev = read_measured(AMX_CURVE_JSON)
        det = dev["machine"]["detect"]
        curve = curve_from_gemm_cells(dev["cpu"]["gemm"])
        clock = float(det["clock_ghz"])
        one = statistics.median(curve["tflops"]["1"]) if curve and det.get("amx") else 0.0
    except (WorkshopError, KeyError, TypeError, ValueError):
        one, clock, curve, det = 0.0, 0.0, None, {}
    if not (one > 0 and clock > 0 and curve):
        raise WorkshopError(
            f"benchmarks/results/{AMX_CURVE_JSON}: no AMX GEMM at 1 thread stored, so a CPU rate measured "
            "without AMX cannot be carried to AMX; calibrate on an AMX Xeon (`workshop bench slice`)"
        )
    peak = clock * AMX_BF16_FLOP_PER_CYCLE / 1000
    n = curve["shape"][0]
    return AmxCeiling(
        one / peak,
        one,
        clock,
        _(
            "{path}: {cpu}, bf16 GEMM {n}x{n}x{n} on 1 thread {one:.3f} TFLOPS = {share:.1%} of one core's "
            "{peak:.3f} TFLOPS AMX peak at {clock:g} GHz, {date}"
        ).format(
            path=AMX_CURVE_JSON,
            cpu=det["cpu_model"],
            n=n,
            one=one,
            share=one / peak,
            peak=peak,
            clock=clock,
            date=dev["machine"]["date"],
        ),
    )


def cpu_efficiency(
    engine: str = "deepspeed", path: str | None = None, cores: int = THREAD_SCALING_CORES
) -> Rate:
    """Model FLOP rate of a training step's compute in the job's own engine, over the AMX bf16 peak at the
    clock cpu_clock_basis names, times the measured thread scaling at `cores` cores. A calibration measured
    on AMX prices AMX directly; one measured without AMX is carried there by its compute share of its own
    machine's GEMM ceiling x the stored AMX host's GEMM ceiling share of its peak (a share of another matmul
    path's peak does not carry to AMX's; a share of the GEMMs it runs on does, as far as the step's other
    work scales with its GEMMs). Named with its host, date and shape."""
    c = calibration(path, engine)
    scale, (lo, hi) = cpu_thread_scaling(cores)
    fmt = dict(
        kind=c.kind, path=c.path, clock=c.clock_ghz, shape=c.shape, cpu=c.cpu_model, date=c.date,
        scale=scale.value, lo=lo, hi=hi, source=scale.source, how=c.compute_why or c.kind,
    )  # fmt: skip
    if c.amx:
        return Rate(
            c.step_share * scale.value,
            N_("of AMX bf16 peak"),
            N_("measured"),
            _(
                "{kind} step's compute ({path}) = {share:.1%} of the {clock:g} GHz AMX peak ({shape}; {cpu}, "
                "{date}; {how}) x {scale:.2f} thread scaling (range {lo:.2f}-{hi:.2f}: {source})"
            ).format(share=c.step_share, **fmt),
        )
    if not c.ceiling_share:
        raise WorkshopError(
            f"{c.path}: measured on {c.cpu_model} without AMX ({c.peak_path}) and without its GEMM ceiling "
            "and step split, so its rate cannot be carried to AMX; calibrate on an AMX Xeon or with "
            "`workshop bench slice`"
        )
    amx = amx_gemm_ceiling()
    return Rate(
        c.ceiling_share * amx.share * scale.value,
        N_("of AMX bf16 peak"),
        N_("measured"),
        _(
            "carried to AMX: the {kind} step's compute ({path}; {shape}; {cpu}, {date}; {how}) ran at "
            "{ceiling:.0%} of its own GEMM ceiling at its shapes, x the AMX GEMM ceiling {amx:.1%} of AMX "
            "peak ({amx_source}) x {scale:.2f} thread scaling (range {lo:.2f}-{hi:.2f}: {source})"
        ).format(ceiling=c.ceiling_share, amx=amx.share, amx_source=amx.source, **fmt),
    )
