"""What a ceiling run is asked for (`CeilingConfig`) and what it decides before anything runs (`plan`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from workshop.errors import (
    WorkshopError,
    check_choice,
    check_positive,
    read_text,
)
from workshop.experiments.ceiling.levers import (
    DEFAULT_LEVERS,
    LEVERS,
    lever_args,
    lever_env,
    parse_levers,
    requirement,
)
from workshop.experiments.ceiling.probe import DEVICES
from workshop.experiments.recipes import WORKBOOK_ALLOCATOR, WORKBOOK_ENGINE, run_argv, runnable_here
from workshop.plan import hardware
from workshop.plan.models import PRESETS
from workshop.train import TrainArgs, parse_args
from workshop.train.data import build_corpus


@dataclass
class CeilingConfig:
    """What every lever shares: preset, shapes (tokens), steps, rounds, ranks and threads, device; the GPU
    peak in TFLOP/s, the seconds each GEMM is timed, the seconds a run may take."""

    model: str = "tiny"
    dataset: str | None = None
    seq_len: int = 256
    micro_batch: int = 4
    steps: int = 4
    rounds: int = 2
    nproc: int = 2
    threads: int | None = 1
    device: str = "cpu"
    levers: tuple[str, ...] = DEFAULT_LEVERS
    peak_tflops: float | None = None  # GPU: when the name is not in GPU_BF16_PEAKS
    gemm_seconds: float = 0.25
    cache_dir: str = "~/.cache/workshop"
    out_dir: str = "out/bench/ceiling"
    timeout_s: float = 1200

    def validate(self) -> None:

        check_choice("device", self.device, DEVICES)
        check_choice("model preset", self.model, PRESETS)
        for name in ("seq_len", "micro_batch", "steps", "rounds", "nproc", "gemm_seconds"):
            check_positive(name, getattr(self, name))
        if self.threads is not None:
            check_positive("threads", self.threads)
        if self.peak_tflops is not None:
            check_positive("peak-tflops", self.peak_tflops)
        if self.steps < 3:
            raise WorkshopError(
                f"steps must be >= 3 (the first, warm-up step is left out of medians), got {self.steps}"
            )
        for n in self.levers:
            check_choice("lever", n, LEVERS)
        if self.dataset is not None:  # its head: a folder, an empty or a binary file fail here
            read_text(self.dataset, "--dataset", "a UTF-8 text file, one sample per line", limit=1 << 16)


def recipe_args(cfg: CeilingConfig) -> TrainArgs:
    """The workbook recipe (recipes.WORKBOOK_ENGINE, the one definition) as TrainArgs, at this benchmark's
    size."""

    dataset = cfg.dataset
    if dataset is None:
        dataset = str(build_corpus(Path(cfg.cache_dir).expanduser() / "corpus.txt"))
    head = run_argv(
        model=cfg.model,
        dataset=dataset,
        seq_len=cfg.seq_len,
        steps=cfg.steps,
        cache_dir=cfg.cache_dir,
        output_dir=str(Path(cfg.out_dir) / "recipe"),
    )
    argv = [
        *head,
        *runnable_here(WORKBOOK_ENGINE, cfg.device),
        "--micro-batch",
        str(cfg.micro_batch),
        "--precision",
        "auto",
        "--master-weights",
        "--backend",
        "nccl" if cfg.device == "cuda" else "gloo",
    ]
    if cfg.threads and cfg.device == "cpu":
        argv += ["--threads", str(cfg.threads)]
    return parse_args(argv)


@dataclass
class Plan:
    """Every lever's TrainArgs and environment, or the reason it is skipped, decided before anything runs."""

    recipe: TrainArgs
    precision: str
    runs: dict[str, tuple[TrainArgs, dict, str | None]] = field(default_factory=dict)  # args, env, allocator
    skipped: dict[str, str] = field(default_factory=dict)  # name -> reason


def plan(cfg: CeilingConfig, *, gemm_ratio: float | None = None) -> Plan:
    """Every lever's TrainArgs and environment here, or why it is skipped (gemm_ratio: the bf16 probe's)."""
    cfg.validate()
    recipe = recipe_args(cfg)
    precision = "bf16" if cfg.device == "cuda" else hardware.resolve_precision(recipe.precision)[0]
    p = Plan(recipe, precision)
    for name in parse_levers(",".join(cfg.levers)):
        lv = LEVERS[name]
        why = (
            "a CPU-only lever (host threads and allocator of CPU ranks)"
            if lv.cpu_only and cfg.device != "cpu"
            else next(
                filter(
                    None,
                    (
                        requirement(n, device=cfg.device, recipe_precision=precision, gemm_ratio=gemm_ratio)
                        for n in lv.needs
                    ),
                ),
                None,
            )
        )
        if why:
            p.skipped[name] = why
            continue
        args = replace(lever_args(lv, recipe), output_dir=str(Path(cfg.out_dir) / name))
        if (
            name != "recipe"
            and args == replace(recipe, output_dir=args.output_dir)
            and (lv.allocator or WORKBOOK_ALLOCATOR) == WORKBOOK_ALLOCATOR
        ):
            p.skipped[name] = "the recipe already runs this way here"
            continue
        p.runs[name] = (args, *lever_env(lv, cfg.device))
    return p


def lever_precision(args, plan_precision: str) -> str:
    """The precision a lever trains in: its own, or the recipe's where it says auto."""
    return plan_precision if args.precision == "auto" else args.precision
