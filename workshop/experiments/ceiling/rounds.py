"""The interleaved rounds of `bench ceiling`: per round, the GEMM ceiling at every shape the levers use,
then every lever once; the result is `result.CeilingResult`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from workshop.experiments.ceiling.config import CeilingConfig, Plan, lever_precision, plan
from workshop.experiments.ceiling.levers import LEVERS, parse_levers
from workshop.experiments.ceiling.machine import device_peaks, isa_path, machine
from workshop.experiments.ceiling.probe import gemm_ceiling
from workshop.experiments.ceiling.result import (
    Bf16Probe,
    CeilingResult,
    CeilingRound,
    LeverResult,
    LeverRun,
    record,
    summarize_lever,
    targets,
)
from workshop.experiments.ceiling.shapes import Linear, linear_shapes
from workshop.experiments.measure import (
    interleave,
)
from workshop.launch.torchrun import run_torchrun
from workshop.plan.models import architecture, build_config
from workshop.train import TrainArgs


def train_once(args: TrainArgs, env: dict, cfg: CeilingConfig, round_: int) -> dict:
    """One torchrun of the entry point; returns its metrics.json."""

    args = replace(args, output_dir=f"{args.output_dir}-r{round_}")
    res = run_torchrun(
        args,
        nproc_per_node=cfg.nproc,
        threads_per_rank=cfg.threads if cfg.device == "cpu" else None,
        env=env,
        progress=False,
        timeout=cfg.timeout_s,
    ).check()
    return res.finished_metrics()


Key = tuple[int, str]  # (tokens per micro-batch, dtype): one GEMM ceiling serves every lever with that key


@dataclass
class Measured:
    """What the rounds measured: each lever's runs, each key's ceiling per round, the failures, the order."""

    runs: dict[str, list[LeverRun]]
    ceilings: dict[str, list[CeilingRound]] = field(default_factory=dict)  # "<tokens>x<dtype>" -> per round
    failed: dict[str, str] = field(default_factory=dict)  # lever -> its first error line
    order: list[str] = field(default_factory=list)


def bf16_probe(cfg: CeilingConfig, shapes: list[Linear], prober: Callable, echo) -> Bf16Probe:
    """bf16 against fp32 at the gate_proj shape, once: the evidence for skipping bf16 where it is emulated."""
    gate = [s for s in shapes if s.name == "gate_proj"]
    fp, bf = (
        prober(
            gate,
            tokens=cfg.micro_batch * cfg.seq_len,
            dtype=dtype,
            nproc=1,
            threads=cfg.threads,
            device="cpu",
            min_seconds=cfg.gemm_seconds,
        )
        for dtype in ("fp32", "bf16")
    )
    probe: Bf16Probe = {
        "shape": f"{cfg.micro_batch * cfg.seq_len}x{gate[0].inp}x{gate[0].out}",
        "fp32_tflops": fp["tflops"],
        "bf16_tflops": bf["tflops"],
        "bf16_over_fp32": bf["tflops"] / fp["tflops"],
    }
    echo(f"bf16 probe: bf16 GEMM at the gate_proj shape = x{probe['bf16_over_fp32']:.3g} of fp32")
    return probe


def probe_all(
    cfg: CeilingConfig, shapes: list[Linear], keys: list[Key], m: Measured, r: int, when: str, prober, echo
) -> dict[str, dict]:
    """The GEMM ceiling at every key the levers use, at the start or end of round r."""
    got = {}
    for tokens, dtype in keys:
        key = f"{tokens}x{dtype}"
        m.order.append(f"ceiling:{key}:{when}#{r}")
        got[key] = prober(
            shapes,
            tokens=tokens,
            dtype=dtype,
            nproc=cfg.nproc,
            threads=cfg.threads if cfg.device == "cpu" else None,
            device=cfg.device,
            min_seconds=cfg.gemm_seconds,
        )
        echo(
            f"[round {r + 1}] GEMM ceiling {key} ({when}): {got[key]['tflops'] * 1e3:.1f} GFLOPS "
            f"({cfg.nproc} ranks)"
        )
    return got


def measure(
    cfg: CeilingConfig, pl: Plan, shapes: list[Linear], keys: list[Key], *, trainer, prober, echo
) -> Measured:
    """Every round: the ceilings, every lever once (a failure is loud and the others go on), the ceilings."""
    arch = architecture(cfg.model)
    m = Measured(runs={n: [] for n in pl.runs})
    for r in range(cfg.rounds):
        first = probe_all(cfg, shapes, keys, m, r, "start", prober, echo)
        for _round, name in interleave(list(pl.runs), 1):
            args, env, _alloc = pl.runs[name]
            m.order.append(f"{name}#{r}")
            try:
                metrics = trainer(args, env, cfg, r)
            except (RuntimeError, TimeoutError) as e:  # loud in the output and the JSON
                m.failed.setdefault(name, str(e).splitlines()[0][:500])
                echo(f"[round {r + 1}] {name}: FAILED: {m.failed[name]}")
                continue
            m.runs[name].append(record(metrics, args, arch))
            echo(
                f"[round {r + 1}] {name}: {metrics['tokens_per_s_median']:.0f} tokens/s, "
                f"{metrics['step_time_s_median']:.2f} s/step"
            )
        last = probe_all(cfg, shapes, keys, m, r, "end", prober, echo)
        for key in first:  # the round's ceiling brackets its levers; a neighbour's load shows up as drift_pct
            a, b = first[key]["tflops"], last[key]["tflops"]
            m.ceilings.setdefault(key, []).append(
                {
                    "round": r,
                    "tflops": (a + b) / 2,
                    "start": first[key],
                    "end": last[key],
                    "drift_pct": round(100 * (b - a) / a, 1),
                }
            )
    return m


def lever_result(name: str, pl: Plan, key: Key | None, m: Measured, peaks: dict) -> LeverResult:
    """One lever as ceiling.json keeps it: skipped or failed with the reason, or measured with its summary."""
    lv = LEVERS[name]
    out: LeverResult = {"label": lv.label, "about": lv.about, "base": lv.base, "status": "skipped"}
    if name in pl.skipped:
        out["reason"] = pl.skipped[name]
        return out
    base_failed = m.failed.get(lv.base) if lv.base else None
    if name in m.failed or base_failed is not None:
        out["status"] = "failed"
        out["reason"] = m.failed.get(name) or f"its base {lv.base} failed: {base_failed}"
        return out
    assert key is not None  # every lever that ran has its ceiling key
    args, out["env"], out["allocator"] = pl.runs[name]
    out["status"], out["train_args"] = "measured", args.to_argv()
    tokens, dtype = key
    summary = summarize_lever(
        m.runs[name],
        m.ceilings[f"{tokens}x{dtype}"],
        peaks,
        dtype,
        m.runs.get(lv.base) if lv.base else None,
        (lv.label, LEVERS[lv.base].label if lv.base else ""),
    )
    out.update(summary)
    return out


def run(
    cfg: CeilingConfig, *, trainer: Callable = train_once, prober: Callable = gemm_ceiling, echo=print
) -> CeilingResult:
    """Measure the step against the GEMM ceiling: interleaved rounds, per round the ceiling at every shape the
    levers use, then every lever once. Returns ceiling.json's record: tokens/s, model TFLOP/s, % of the same
    round's ceiling and of the nominal peak, and each lever's effect (x) against its base."""

    cfg.validate()
    mach = machine(cfg.device)
    p0 = plan(cfg)
    shapes = linear_shapes(build_config(cfg.model))
    probe = bf16_probe(cfg, shapes, prober, echo) if cfg.device == "cpu" and p0.precision == "fp32" else None
    pl = plan(cfg, gemm_ratio=probe["bf16_over_fp32"] if probe else None)
    for name, why in pl.skipped.items():
        echo(f"skip {name}: {why}")
    keys = {
        n: (a.micro_batch * a.seq_len, lever_precision(a, pl.precision)) for n, (a, _, _) in pl.runs.items()
    }
    peaks = device_peaks(cfg, mach)
    t0 = time.time()
    m = measure(
        cfg, pl, shapes, list(dict.fromkeys(keys.values())), trainer=trainer, prober=prober, echo=echo
    )
    wall_s = round(time.time() - t0, 1)
    out: CeilingResult = {
        "benchmark": "ceiling",
        "device": cfg.device,
        "config": {**asdict(cfg), "levers": list(cfg.levers)},
        "machine": mach,
        "isa_path": isa_path(mach["isa_flags"] | {"arch": mach["arch"]}, pl.precision)
        if cfg.device == "cpu"
        else f"GPU tensor cores ({pl.precision})",
        "precision": pl.precision,
        "peaks": peaks,
        "arch": asdict(architecture(cfg.model)),
        "recipe": asdict(pl.recipe),
        "shapes": [asdict(s) for s in shapes],
        "bf16_probe": probe,
        "order": m.order,
        "ceilings": m.ceilings,
        "levers": {n: lever_result(n, pl, keys.get(n), m, peaks) for n in parse_levers(",".join(cfg.levers))},
        "wall_s": wall_s,
    }
    out["targets"] = targets(out)
    return out
