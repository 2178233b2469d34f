"""`workshop bench slice`: a slice of the real Llama-3-8B (its own hidden 4096, FFN 14336, GQA 32/8 heads;
N decoder layers; random weights from a LlamaConfig, no hub) trained with the job's engine (DeepSpeed ZeRO-3
over gloo, bf16 where this CPU multiplies bf16 natively, else fp32) through the one entry point, beside what
the planner predicts for the same slice on this machine.

Why a slice: every CPU plan in chapter 01 rests on one rate measured on a 63M-parameter preset; a slice keeps
the 8B model's own matmul shapes (4096 x 14336, the head) at a size one small machine can train.

Memory first: the bench sizes the slice with the memory planner before any rank starts. Keeping the real
128,256-token embedding and head costs 1.05 B parameters of Adam state (1 layer + that head does not fit 23
GB at 1 or 2 ranks); when it does not fit the RAM found here, the embedding and head are cut to
`CUT_VOCAB` rows (the local tokenizer's size) and the output says so; every other shape stays the 8B's.

No GPU machine was at hand when this was written: `--device` is not offered; the step, the planner's
prediction and the JSON are CPU-only (chapter 06 and `bench ceiling --device cuda` measure GPUs).
"""

from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from workshop.errors import WorkshopError, check_positive
from workshop.lang import N_, _
from workshop.plan import calibration, hardware
from workshop.plan.estimate import Candidate
from workshop.plan.memory import GiB, PlanOptions, rank_peak
from workshop.plan.models import PRESETS, architecture, build_config, slice_overrides
from workshop.plan.scaling import measure_curve
from workshop.report.verdict import share, spread_pct, steady

MODEL = "llama-3-8b"
REAL_VOCAB = PRESETS[MODEL].config["vocab_size"]  # 128,256
CUT_VOCAB = (
    8192  # the local tokenizer's size: the vocab a slice falls back to when the real head does not fit
)
MAX_SEQ = PRESETS[MODEL].config["max_position_embeddings"]
MEMORY_SHARE = 0.9  # of the memory available at the check, a slice may plan to use (the rest: slack)
REFERENCE_CORES = 96  # the host the planner's thread scaling is quoted for (a 48xlarge's physical cores)


@dataclass
class SliceConfig:
    """The slice and how it trains: decoder layers, embedding rows (None: the real 128,256 if it fits,
    else CUT_VOCAB), ranks x threads, micro-batch and sequence (tokens), optimizer steps (the first is
    warm-up)."""

    layers: int = 1
    vocab: int | None = None
    ranks: int = 2
    threads: int = 1
    micro_batch: int = 1
    seq_len: int = 256
    steps: int = 5
    gemm_seconds: float = 0.2
    cache_dir: str = "~/.cache/workshop"
    out_dir: str = "out/bench/slice"
    timeout_s: float = 900

    def validate(self) -> None:
        for name in ("layers", "ranks", "threads", "micro_batch", "seq_len", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise WorkshopError(f"--{name.replace('_', '-')} must be a whole number, got {value!r}")
            check_positive(name.replace("_", "-"), value)
        if self.vocab is not None:
            check_positive("vocab", self.vocab)
        check_positive("gemm_seconds", self.gemm_seconds)
        if self.steps < 3:
            raise WorkshopError(
                f"--steps must be >= 3 (the first, warm-up step is left out), got {self.steps}"
            )
        if self.seq_len > MAX_SEQ:
            raise WorkshopError(
                f"--seq-len {self.seq_len}: Llama-3-8B's context is {MAX_SEQ}; allowed 1..{MAX_SEQ}"
            )
        layers_max = PRESETS[MODEL].config["num_hidden_layers"]
        if self.layers > layers_max:
            raise WorkshopError(
                f"--layers {self.layers}: Llama-3-8B has {layers_max}; allowed 1..{layers_max}"
            )
        cores = hardware.physical_cores()
        if self.ranks * self.threads > cores:
            raise WorkshopError(
                f"--ranks {self.ranks} x --threads {self.threads} = {self.ranks * self.threads} cores; this "
                f"machine has {cores} physical cores: allowed ranks x threads <= {cores}"
            )


def rank_bytes(layers: int, vocab: int, cfg: SliceConfig, precision: str) -> int:
    """The memory planner's bytes per rank for this slice (ZeRO-3, Adam, fp32 masters in bf16)."""
    arch = architecture(MODEL, layers, vocab)
    opts: PlanOptions = {
        "zero_stage": 3,
        "offload_optimizer": False,
        "offload_param": False,
        "micro_batch": cfg.micro_batch,
        "seq_len": cfg.seq_len,
        "grad_ckpt": False,
        "dtype": precision,
    }
    return rank_peak(arch, cfg.ranks, opts, "cpu")


@dataclass(frozen=True)
class Fit:
    """What the memory check decided: the vocab, the bytes the slice needs, what was found, and why."""

    vocab: int
    need_bytes: int  # all ranks
    available_bytes: int
    max_layers: int  # at this vocab, ranks and shapes
    note: str


def max_layers(vocab: int, cfg: SliceConfig, precision: str, budget: float) -> int:
    n = 0
    while (
        n < PRESETS[MODEL].config["num_hidden_layers"]
        and cfg.ranks * rank_bytes(n + 1, vocab, cfg, precision) <= budget
    ):
        n += 1
    return n


def check_memory(cfg: SliceConfig, precision: str, available_bytes: int) -> Fit:
    """Before any rank starts: the slice fits MEMORY_SHARE of the memory available, or one error that says
    how many layers would."""
    budget = MEMORY_SHARE * available_bytes
    gib = available_bytes / GiB
    vocabs = [cfg.vocab] if cfg.vocab else [REAL_VOCAB, CUT_VOCAB]
    for vocab in vocabs:
        need = cfg.ranks * rank_bytes(cfg.layers, vocab, cfg, precision)
        if need <= budget:
            note = (
                _("embedding and head: {rows:,} rows (as asked)")
                if cfg.vocab
                else _("embedding and head: {rows:,} rows (Llama-3-8B's own)")
                if vocab == REAL_VOCAB
                else _("embedding and head: {rows:,} rows")
            ).format(rows=vocab)
            if not cfg.vocab and vocab != REAL_VOCAB:
                real = cfg.ranks * rank_bytes(cfg.layers, REAL_VOCAB, cfg, precision)
                note = _(
                    "embedding and head cut from Llama-3-8B's {real_rows:,} rows to {rows:,}: with the real "
                    "head {layers} layer(s) need {need:.1f} GiB over {ranks} rank(s), this machine has "
                    "{gib:.1f} GiB available"
                ).format(
                    real_rows=REAL_VOCAB,
                    rows=vocab,
                    layers=cfg.layers,
                    need=real / GiB,
                    ranks=cfg.ranks,
                    gib=gib,
                )
            return Fit(vocab, need, available_bytes, max_layers(vocab, cfg, precision, budget), note)
    vocab = vocabs[-1]
    most = max_layers(vocab, cfg, precision, budget)
    need = cfg.ranks * rank_bytes(cfg.layers, vocab, cfg, precision)
    raise WorkshopError(
        f"--layers {cfg.layers} (vocab {vocab:,}, {cfg.ranks} rank(s), ZeRO-3 with Adam) needs "
        f"{need / GiB:.1f} GiB; this machine has {gib:.1f} GiB available ({MEMORY_SHARE:.0%} usable): "
        + (
            f"at most {most} layer(s) fit"
            if most
            else "not even 1 layer fits: use fewer ranks or a smaller --vocab"
        )
    )


def slice_flops_per_token(layers: int, vocab: int, seq_len: int) -> float:
    """Training FLOPs per token counted from the slice's own matmul shapes (q, k, v, o, gate, up, down per
    layer and the head; forward, input and weight gradients) plus attention's score and value products
    (12 x layers x hidden x seq): the count the tests hold equal to the planner's formula."""
    from workshop.experiments.ceiling.shapes import linear_shapes

    cfg = build_config(MODEL, **slice_overrides(layers, vocab))
    matmuls = sum(s.train_flops(1) for s in linear_shapes(cfg))
    return matmuls + 12.0 * layers * cfg.hidden_size * seq_len


_DS_TIMERS = re.compile(
    r"(fwd_microstep|bwd_microstep|bwd_inner_microstep|bwd_allreduce_microstep|step_microstep): ([\d.]+)"
)


def ds_timer_split(log: str) -> list[dict[str, float]]:
    """DeepSpeed's wall_clock_breakdown lines (rank 0), one dict of seconds per optimizer step."""
    out = []
    for line in log.splitlines():
        if "time (ms)" in line and "microstep" in line:
            got = {k: float(v) / 1000 for k, v in _DS_TIMERS.findall(line)}
            if got:
                out.append(got)
    return out


OTHER_LOAD_SHARE = 0.1  # other processes using more than this share of the CPUs: the result says "under load"
LOAD_SAMPLE_S = 1.0  # the look at other work before the run starts


def cpu_seconds_by_process() -> dict[tuple[int, float], float]:
    """CPU seconds (user + system) of every process but this one and its children, keyed by (pid, start
    time) so a reused pid is not mistaken for the same process: the bench's own work is never "other"."""
    import psutil

    me = psutil.Process()
    ours = {me.pid} | {c.pid for c in me.children(recursive=True)}
    out = {}
    for p in psutil.process_iter(["pid", "create_time", "cpu_times"]):
        t = p.info["cpu_times"]
        if p.info["pid"] in ours or t is None:
            continue
        out[(p.info["pid"], p.info["create_time"])] = t.user + t.system
    return out


def other_load(before: dict, after: dict, wall_s: float, label: str) -> dict:
    """The CPUs other processes used between two snapshots (cpu_seconds_by_process), as a number of
    CPUs busy on average, against this machine's: a shared machine says so in the stored result."""
    used = sum(max(0.0, after[k] - v) for k, v in before.items() if k in after)
    cpus = os.cpu_count() or 1
    busy = used / wall_s if wall_s > 0 else 0.0
    return {
        "window": label,
        "other_cpu_s": round(used, 2),
        "wall_s": round(wall_s, 1),
        "other_cpus_busy": round(busy, 2),
        "logical_cpus": cpus,
        "loadavg_1min": round(os.getloadavg()[0], 2),  # kept for the record: it holds the bench's own work
        "under_load": busy > OTHER_LOAD_SHARE * cpus,
    }


def load_note(sample_s: float = LOAD_SAMPLE_S) -> dict:
    """Other processes' CPU use over `sample_s` seconds now (not the load average, which still holds this
    bench's own earlier work and counts its own ranks)."""
    before, t0 = cpu_seconds_by_process(), time.time()
    time.sleep(sample_s)
    return other_load(before, cpu_seconds_by_process(), time.time() - t0, N_("before the run"))


def core_facts(d: hardware.Detection) -> dict:
    """Physical cores against vCPUs, and what a thread count means here."""
    per_core = hardware.threads_per_core()
    return {
        "physical_cores": d["cores"],
        "vcpus": d.get("logical_cpus"),
        "threads_per_core": per_core,
        "sentence": hardware.cores_sentence(d["cores"], d.get("logical_cpus"), per_core),
    }


def train_args(cfg: SliceConfig, vocab: int, dataset: str):
    """The entry point's arguments: the job's engine (ZeRO-3, gloo, bf16 or fp32 by what this CPU does)."""
    from workshop.train import parse_args

    return parse_args(
        [
            "--model", MODEL, "--layers", str(cfg.layers), "--vocab", str(vocab),
            "--dataset", dataset, "--seq-len", str(cfg.seq_len), "--micro-batch", str(cfg.micro_batch),
            "--grad-accum", "1", "--max-steps", str(cfg.steps), "--warmup-steps", "0", "--lr", "1e-4",
            "--engine", "deepspeed", "--zero-stage", "3", "--backend", "gloo", "--precision", "auto",
            "--attn-implementation", "sdpa", "--optimizer", "adamw_torch_fused",
            "--threads", str(cfg.threads),
            "--timers", "--max-grad-jump", "0",
            "--cache-dir", cfg.cache_dir, "--output-dir", str(Path(cfg.out_dir) / "train"),
        ]
    )  # fmt: skip


def predict(d, cfg: SliceConfig, vocab: int, precision: str, ceiling_tflops: float) -> dict:
    """The planner's formula for this slice here: estimate.step_terms on this CPU's peak, with the CPU rate
    carried here the way chapter 01 carries it to AMX hosts (calibration.carried_share: the stored slice's
    compute share of its own GEMM ceiling x this machine's GEMM ceiling at the slice's shapes, measured in
    this run at its ranks and threads, so no thread scaling is added)."""
    from workshop.plan.here import predict_here

    arch = architecture(MODEL, cfg.layers, vocab)
    job = Candidate.measured(
        nodes=1,
        procs_per_node=cfg.ranks,
        zero_stage=3,
        micro_batch=cfg.micro_batch,
        grad_accum=1,
        seq_len=cfg.seq_len,
        precision=precision,
    )
    peaks = hardware.machine_peaks(d, cores=min(cfg.ranks * cfg.threads, d["cores"]))
    peak = peaks["bf16"] if precision == "bf16" else peaks["fp32"]
    if peak is None:
        raise WorkshopError(f"no {precision} peak for {d['cpu_model']}: its clock is unknown")
    eff = calibration.carried_share(ceiling_tflops, peak.tflops)
    cal = calibration.calibration()
    out = predict_here(d, arch, job, cfg.ranks * cfg.threads, eff).as_dict()
    out["calibration"] = {
        "path": cal.path,
        "cpu_model": cal.cpu_model,
        "date": cal.date,
        "shape": cal.shape,
        "ceiling_tflops": ceiling_tflops,
        # the same CPU model and the same shape: the compute share is this run's own kind, in-sample
        "in_sample": cal.cpu_model == d.get("cpu_model") and cal.shape == calibration.slice_shape(
            {"layers": cfg.layers, "vocab": vocab, "seq_len": cfg.seq_len,
             "micro_batch": cfg.micro_batch, "ranks": cfg.ranks, "threads": cfg.threads}
        ),
    }  # fmt: skip
    return out


def predict_around(d, cfg: SliceConfig, vocab: int, precision: str, ceilings: list[float]) -> dict:
    """predict() at the median of the GEMM ceilings measured before and after the run, with the tokens/s
    it gives at the lowest and the highest of them: a ceiling that moved while the run trained moves the
    prediction by as much, and the range says so."""
    out = predict(d, cfg, vocab, precision, statistics.median(ceilings))
    out["tokens_per_s_range"] = sorted(
        predict(d, cfg, vocab, precision, c)["tokens_per_s"] for c in (min(ceilings), max(ceilings))
    )
    return out


def _detection(machine_record: dict) -> dict:
    """A stored result's machine record as hardware.detect's dict (its ISA flags at the top level)."""
    return {**machine_record, **machine_record.get("isa_flags", {})}


def load(path: str | Path) -> dict:
    """A stored slice.json with the planner's prediction recomputed by this planner (the stored one came
    from the planner of its day): its measurement unchanged, prediction and ratios replaced, marked."""
    import json

    res = json.loads(Path(path).read_text())
    cfg = SliceConfig(**{k: v for k, v in res["config"].items() if k in SliceConfig.__dataclass_fields__})
    if cfg.vocab is None:
        cfg.vocab = res["shape"]["vocab"]
    res["prediction"] = predict_around(
        _detection(res["machine"]), cfg, cfg.vocab, res["precision"], res["ceiling_tflops"]
    )
    res["prediction"]["recomputed"] = True
    _ratios(res)
    ts = res.setdefault("thread_scaling", {})
    ts.pop("sentence", None), ts.pop("at_reference", None)  # an older file's extrapolation of this CPU
    ts["planner"] = _planner_scaling()
    return res


def _planner_scaling() -> dict:
    """The one thread-scaling range the planner prices a large host with (chapter 01's), at 96 cores."""
    rate, (low, high) = calibration.cpu_thread_scaling(REFERENCE_CORES)
    return {"cores": REFERENCE_CORES, "value": rate.value, "low": low, "high": high, "source": rate.source}


def _ratios(res: dict) -> None:
    tps, pred = res["tokens_per_s"], res["prediction"]["tokens_per_s"]
    res["ratio_measured_over_predicted"] = tps["median"] / pred
    res["ratio_range"] = [tps["min"] / pred, tps["max"] / pred]


def run(cfg: SliceConfig, *, echo=print) -> dict:
    """Check memory, measure the thread curve and the GEMM ceiling, train the slice, predict it, compare."""
    import psutil

    from workshop.experiments.ceiling.probe import gemm_ceiling
    from workshop.experiments.ceiling.shapes import linear_shapes
    from workshop.launch.torchrun import run_torchrun
    from workshop.train.data import build_corpus

    cfg.validate()
    precision, why = hardware.resolve_precision("auto")
    d = hardware.detect(probe_onednn=False)
    fit = check_memory(cfg, precision, psutil.virtual_memory().available)
    echo(f"slice: Llama-3-8B shapes, {cfg.layers} decoder layer(s); {fit.note}")
    echo(f"memory check: {fit.need_bytes / GiB:.1f} GiB over {cfg.ranks} rank(s) of "
         f"{fit.available_bytes / GiB:.1f} GiB available; at most {fit.max_layers} layer(s) fit")  # fmt: skip
    echo(f"precision: {precision} ({why})")
    cores = core_facts(d)
    echo(cores["sentence"])
    load_before = load_note()
    others, t_start = cpu_seconds_by_process(), time.time()  # other work over the whole measurement
    shapes = linear_shapes(build_config(MODEL, **slice_overrides(cfg.layers, fit.vocab)))
    tokens = cfg.micro_batch * cfg.seq_len
    gate = next(s for s in shapes if s.name == "gate_proj")
    threads = list(range(1, d["cores"] + 1))
    curve = measure_curve(tokens, gate.inp, gate.out, threads, dtype=precision, min_seconds=cfg.gemm_seconds)
    echo("GEMM " + precision + f" {tokens}x{gate.inp}x{gate.out} by threads: " + ", ".join(
        f"{t}: {statistics.median(v):.3f}" for t, v in curve["tflops"].items()) + " TFLOPS")  # fmt: skip

    def ceiling() -> float:
        got = gemm_ceiling(
            shapes, tokens=tokens, dtype=precision, nproc=cfg.ranks, threads=cfg.threads,
            min_seconds=cfg.gemm_seconds,
        )  # fmt: skip
        return float(got["tflops"])

    before = ceiling()
    args = train_args(cfg, fit.vocab, str(build_corpus(Path(cfg.cache_dir).expanduser() / "corpus.txt")))
    t0 = time.time()
    res = run_torchrun(args, nproc_per_node=cfg.ranks, threads_per_rank=cfg.threads, progress=False,
                       timeout=cfg.timeout_s)  # fmt: skip
    metrics = res.finished_metrics()
    train_s = time.time() - t0
    after = ceiling()
    log = Path(res.log_path).read_text(errors="replace") if res.log_path else ""
    during = other_load(others, cpu_seconds_by_process(), time.time() - t_start, N_("during the measurement"))
    return summarize(cfg, d, fit, precision, why, cores, curve, [before, after], metrics, log,
                     train_s, [load_before, during])  # fmt: skip


def summarize(cfg, d, fit: Fit, precision, why, cores, curve, ceilings, metrics, log, train_s, loads) -> dict:
    """slice.json: the measurement, the planner's prediction beside it, and the shares."""
    from workshop.experiments.ceiling.machine import machine

    fpt = slice_flops_per_token(cfg.layers, fit.vocab, cfg.seq_len)
    tps = steady([s["tokens_per_s"] for s in metrics["steps"]])
    step_s = steady([s["step_time_s"] for s in metrics["steps"]])
    model_tflops = [x * fpt / 1e12 for x in tps]
    peaks = hardware.machine_peaks(d, cores=cfg.ranks * cfg.threads)
    peak = peaks["bf16"] if precision == "bf16" else peaks["fp32"]
    timers = ds_timer_split(log)[1:]  # the first step is warm-up
    split = _split(timers)
    pred = predict_around(d, cfg, fit.vocab, precision, ceilings)
    median_tps = statistics.median(tps)
    sh = share(model_tflops, ceilings, part_label=_("the slice's model FLOP rate"),
               reference_label=_("GEMM ceiling at its shapes"), unit="TFLOPS")  # fmt: skip
    mach = machine("cpu")
    out = {
        "benchmark": "slice",
        "machine": mach,
        "date": mach["date"],
        "cores": cores,
        "load": loads,
        "under_load": any(x["under_load"] for x in loads),
        "shape": _shape(cfg, fit),
        "memory_check": {**asdict(fit), "share_usable": MEMORY_SHARE},
        "config": asdict(cfg),
        "engine": "DeepSpeed ZeRO-3 over gloo, AdamW (fused), SDPA attention, no compile",
        "precision": precision,
        "precision_why": why,
        "flops_per_token": fpt,
        "tokens_per_s": {**_stats(tps), "per_core": median_tps / (cfg.ranks * cfg.threads)},
        "step_s": _stats(step_s),
        "step_split": split,
        "peak_rss_gb_per_rank": metrics.get("peak_rss_gb_per_rank"),
        "loss": [metrics.get("first_loss"), metrics.get("final_loss")],
        "model_tflops": _stats(model_tflops),
        "ceiling_tflops": ceilings,
        "share_of_ceiling": {
            "pct": sh.pct,
            "low": sh.low,
            "high": sh.high,
            "clear": sh.clear,
            "sentence": sh.sentence,
        },  # fmt: skip
        "peak": _peak(d, cfg, peak, model_tflops),
        "prediction": pred,
        "thread_curve": curve,
        "thread_scaling": {
            # this machine's curve, within the threads it has: never extrapolated to a large host here
            "per_core": {str(k): v for k, v in _per_core(curve).items()},
            # the one range the planner prices large hosts with (chapter 01), from the stored AMX curve
            "planner": _planner_scaling(),
        },
        "train_wall_s": round(train_s, 1),
    }
    _ratios(out)
    return out


def _shape(cfg, fit: Fit) -> dict:
    """The slice's shape: Llama-3-8B's layer widths, cut to cfg.layers and the vocabulary that fits."""
    return {
        "model": MODEL,
        "layers": cfg.layers,
        "vocab": fit.vocab,
        "hidden": 4096,
        "intermediate": 14336,
        "heads": 32,
        "kv_heads": 8,
        "params": architecture(MODEL, cfg.layers, fit.vocab).params,
        "micro_batch": cfg.micro_batch,
        "seq_len": cfg.seq_len,
        "ranks": cfg.ranks,
        "threads": cfg.threads,
    }  # fmt: skip


def _peak(d: dict, cfg, peak, model_tflops: list[float]) -> dict:
    """The machine's peak at the slice's cores and the median model FLOP rate's share of it."""
    return {
        "tflops": peak.tflops if peak else None,
        "path": peak.path if peak else None,
        "clock_ghz": d.get("clock_ghz"),
        "clock_source": d.get("clock_source"),
        "cores": cfg.ranks * cfg.threads,
        "pct": 100 * statistics.median(model_tflops) / peak.tflops if peak else None,
    }  # fmt: skip


def _per_core(curve):
    from workshop.plan.scaling import per_core

    return per_core(curve)


def _stats(xs: list[float]) -> dict:
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "spread_pct": round(spread_pct(xs), 1),
        "values": xs,
    }


def _split(timers: list[dict[str, float]]) -> dict:
    """Seconds per step: forward+backward and optimizer from DeepSpeed's timers; the collectives ZeRO-3 runs
    inside forward and backward (its gathers and reduce-scatters are hooks) cannot be told apart by them."""
    if not timers:
        return {"measured": False, "why": "no DeepSpeed wall_clock_breakdown lines in the log"}

    def med(key: str) -> float | None:
        xs = [t[key] for t in timers if key in t]
        return statistics.median(xs) if xs else None

    fwd, bwd, step = med("fwd_microstep"), med("bwd_microstep"), med("step_microstep")
    return {
        "measured": True,
        "forward_backward_s": (fwd or 0) + (bwd or 0),
        "forward_s": fwd,
        "backward_s": bwd,
        "optimizer_s": step,
        "allreduce_s": med("bwd_allreduce_microstep"),
        "collectives_s": None,
        "collectives_why": "ZeRO-3's all-gathers and reduce-scatters run inside forward and backward "
        "(module hooks): DeepSpeed's timers do not separate them; the planner's modelled share is beside",
        "steps": len(timers),
    }
