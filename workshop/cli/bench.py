"""`workshop bench`: side-by-side benchmarks that write JSON results, and `workshop bench ceiling`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workshop.cli.args import comma_list
from workshop.cli.base import command
from workshop.errors import WorkshopError, check_choice, check_output
from workshop.paths import IMAGES_DIR, RESULTS_DIR

BENCH_ABOUT = (
    "`workshop bench`: side-by-side benchmarks that prove (or refute) that the workbook's CPU recipe is "
    "the fast\none."
)
CEILING_ABOUT = (
    "`workshop bench ceiling`: the training step's FLOP rate as a share of THIS machine's own matmul ceiling."
)


def _bench_parser() -> argparse.ArgumentParser:
    from workshop.experiments.bench.config import BENCHMARKS, BenchConfig

    p = argparse.ArgumentParser(prog="workshop bench", description=BENCH_ABOUT)
    p.add_argument(
        "benchmark",
        nargs="+",
        help=f"{' | '.join(BENCHMARKS)} | all | summary | ceiling | slice (several: their "
        "training variants are interleaved in ONE series of rounds)",
    )
    p.add_argument(
        "--dataset", default=None, help="text file, one sample per line (default: the paragraph corpus)"
    )
    p.add_argument("--model", default="small")
    p.add_argument(
        "--steps", type=int, default=BenchConfig.steps, help="optimizer steps per run (same for all)"
    )
    p.add_argument("--rounds", type=int, default=BenchConfig.rounds, help="interleaved A B rounds")
    p.add_argument("--nproc", type=int, default=BenchConfig.nproc, help="ranks per run")
    p.add_argument("--cache-dir", default=BenchConfig.cache_dir)
    p.add_argument("--out-dir", default=BenchConfig.out_dir, help="where each run's logs and metrics go")
    p.add_argument("--results-dir", default=str(RESULTS_DIR))
    p.add_argument("--images-dir", default=str(IMAGES_DIR))
    p.add_argument("--json-out", default=None, help="write this benchmark's JSON here instead of results-dir")
    p.add_argument(
        "--ipex-python", default=None, help="python of the IPEX environment (default: auto-detect)"
    )
    return p


def _check_paths(a: argparse.Namespace, results_dir: str, images_dir: str, out_dir: str) -> None:
    """The folders and files a run writes, and the stored results the summary reads, judged before any
    benchmark runs: a wrong path or a damaged result file must not cost a benchmark's minutes."""
    from workshop.experiments.bench.summary import load_results

    if a.benchmark == ["summary"] and not Path(results_dir).is_dir():
        raise WorkshopError(
            f"--results-dir {results_dir!r}: no such folder; expected the benchmarks' JSON results"
        )
    for flag, path in (("--results-dir", results_dir), ("--images-dir", images_dir), ("--out-dir", out_dir)):
        check_output(path, flag, folder=True)
    if a.json_out:
        check_output(a.json_out, "--json-out")
    if a.ipex_python and not (Path(a.ipex_python).is_file() and os.access(a.ipex_python, os.X_OK)):
        raise WorkshopError(
            f"--ipex-python {a.ipex_python!r} is not an executable file; expected the python of "
            "the IPEX environment (environment-ipex.yml)"
        )
    load_results(results_dir)


@command
def bench(argv: list[str] | None = None) -> int | None:
    """`workshop bench NAME... [options]`; `workshop bench ceiling [options]` is `ceiling()`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = _bench_parser()
    if argv[:1] == ["ceiling"]:
        return ceiling(argv[1:])
    if argv[:1] == ["suite"]:
        return suite(argv[1:])
    if argv[:1] == ["slice"]:
        return slice_(argv[1:])
    from workshop.experiments.bench.config import BENCHMARKS, BenchConfig
    from workshop.experiments.bench.suite import run_benchmarks
    from workshop.experiments.bench.summary import format_rows, load_results, plot, summary_rows
    from workshop.experiments.measure import save

    a = p.parse_args(argv)
    for alone in ("ceiling", "suite"):
        if alone in a.benchmark:
            raise WorkshopError(
                f"run `python -m workshop bench {alone}` on its own: its options differ "
                f"(see `python -m workshop bench {alone} --help`)"
            )
    for b in a.benchmark:
        check_choice("benchmark", b, (*BENCHMARKS, "all", "summary"))
    cfg = BenchConfig(
        model=a.model,
        dataset=a.dataset,
        steps=a.steps,
        rounds=a.rounds,
        nproc=a.nproc,
        cache_dir=a.cache_dir,
        out_dir=a.out_dir,
        results_dir=a.results_dir,
        images_dir=a.images_dir,
    )
    cfg.validate()
    _check_paths(a, cfg.results_dir, cfg.images_dir, cfg.out_dir)
    names = (
        list(BENCHMARKS)
        if "all" in a.benchmark
        else [b for b in dict.fromkeys(a.benchmark) if b != "summary"]
    )
    if a.json_out and len(names) != 1:
        raise WorkshopError(f"--json-out names one benchmark's file, got {names}; use --results-dir")
    done = run_benchmarks(names, cfg, ipex_python=a.ipex_python)
    for name, result in done.items():
        print(f"wrote {save(name, result, cfg.results_dir, a.json_out)}")
    if done:
        for path in plot({**load_results(cfg.results_dir), **done}, cfg.images_dir):
            print(f"figure {path}")
    print(format_rows(summary_rows({**load_results(cfg.results_dir), **done})))
    return 0


def _ceiling_parser() -> argparse.ArgumentParser:
    from workshop.experiments.ceiling.config import CeilingConfig
    from workshop.experiments.ceiling.levers import DEFAULT_LEVERS, LEVERS
    from workshop.experiments.ceiling.probe import DEVICES
    from workshop.experiments.ceiling.table import CEILING_JSON

    d = CeilingConfig()
    p = argparse.ArgumentParser(prog="workshop bench ceiling", description=CEILING_ABOUT)
    p.add_argument("--model", default=d.model, help="preset")
    p.add_argument(
        "--dataset", default=None, help="text file, one sample per line (default: the paragraph corpus)"
    )
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--micro-batch", type=int, default=d.micro_batch)
    p.add_argument(
        "--steps", type=int, default=d.steps, help="optimizer steps per run (the first is left out)"
    )
    p.add_argument("--rounds", type=int, default=d.rounds, help="interleaved rounds")
    p.add_argument("--nproc", type=int, default=d.nproc, help="ranks (GPUs with --device cuda)")
    p.add_argument(
        "--threads", type=int, default=d.threads, help="threads per CPU rank (torch.set_num_threads)"
    )
    p.add_argument("--device", default=d.device, help=" | ".join(DEVICES) + " (cuda: backend nccl, GPU peak)")
    p.add_argument("--peak-tflops", type=float, default=None, help="GPU bf16 peak when its name is not known")
    p.add_argument(
        "--levers",
        type=comma_list(choices=LEVERS, noun="levers"),
        default=",".join(DEFAULT_LEVERS),
        help="comma-separated, from: " + ", ".join(LEVERS),
    )
    p.add_argument(
        "--gemm-seconds", type=float, default=d.gemm_seconds, help="time per GEMM in the ceiling probe"
    )
    p.add_argument("--cache-dir", default=d.cache_dir)
    p.add_argument("--out-dir", default=d.out_dir)
    p.add_argument("--json-out", default=None, help=f"default: {CEILING_JSON}")
    p.add_argument("--images-dir", default=str(IMAGES_DIR))
    return p


@command
def ceiling(argv: list[str] | None = None) -> int | None:
    """`workshop bench ceiling [options]`: measure, write ceiling.json and its figure, print the table."""
    from workshop.experiments.ceiling.config import CeilingConfig
    from workshop.experiments.ceiling.rounds import run
    from workshop.experiments.ceiling.table import CEILING_JSON, figure, format_table, rows
    from workshop.experiments.measure import save
    from workshop.launch.torchrun import check_fits

    a = _ceiling_parser().parse_args(argv)
    cfg = CeilingConfig(
        model=a.model,
        dataset=a.dataset,
        seq_len=a.seq_len,
        micro_batch=a.micro_batch,
        steps=a.steps,
        rounds=a.rounds,
        nproc=a.nproc,
        threads=a.threads if a.device == "cpu" else None,
        device=a.device,
        levers=tuple(a.levers),
        peak_tflops=a.peak_tflops,
        gemm_seconds=a.gemm_seconds,
        cache_dir=a.cache_dir,
        out_dir=a.out_dir,
    )
    cfg.validate()
    check_output(a.json_out or CEILING_JSON, "--json-out")
    for flag, path in (
        ("--out-dir", a.out_dir),
        ("--images-dir", a.images_dir),
        ("--cache-dir", a.cache_dir),
    ):
        check_output(path, flag, folder=True)
    if a.device == "cpu":
        check_fits(cfg.nproc, cfg.threads)
    res = run(cfg)
    print(f"wrote {save('ceiling', res, RESULTS_DIR, a.json_out or CEILING_JSON)}")
    print(f"figure {figure(res, Path(a.images_dir) / 'bench_ceiling.png')}")
    print(f"{res['machine'].get('gpu') or res['machine']['cpu_model']}: {res['isa_path']}")
    print(format_table(rows(res)))
    t = res["targets"]["step_pct_of_ceiling"]
    print(
        f"step % of GEMM ceiling: recipe {t['recipe']}, best {t['best']} ({t['best_lever']}); target >= "
        f"{t['target']}: {t['verdict']}"
    )
    return 0


@command
def suite(argv: list[str] | None = None) -> int:
    """`workshop bench suite [--results-dir D] [PYTEST_ARGS...]`: the test command, timed per file."""
    from workshop.experiments.bench.testsuite import time_suite

    p = argparse.ArgumentParser(
        prog="workshop bench suite",
        description="The README's test command (`python -m pytest -q`), timed per test file and notebook; a "
        "passing run is appended, with this machine and date, to RESULTS_DIR/timings.json.",
    )
    p.add_argument("--results-dir", default=str(RESULTS_DIR))
    a, pytest_args = p.parse_known_args(argv)
    if not Path(a.results_dir).is_dir():
        raise WorkshopError(f"--results-dir {a.results_dir!r}: no such folder")
    code, timing = time_suite(pytest_args, Path(a.results_dir) / "timings.json")
    slowest = list(timing.parts.items())[:10]
    print(
        f"{timing.total_s / 60:.1f} min in tests ({timing.extra.get('wall_s')} s wall) on "
        f"{timing.machine.describe()}; slowest files:"
    )
    for where, sec in slowest:
        print(f"  {sec:7.1f} s  {where}")
    return code


SLICE_ABOUT = (
    "`workshop bench slice`: N decoder layers of Llama-3-8B's own shapes trained with ZeRO-3 over gloo on "
    "this "
    "CPU, beside the planner's prediction for the same slice here."
)
_SLICE_INTS = ("layers", "vocab", "threads", "ranks", "micro_batch", "seq_len", "steps")


def _slice_parser() -> argparse.ArgumentParser:
    from workshop.experiments.slice import SliceConfig

    d = SliceConfig()
    p = argparse.ArgumentParser(prog="workshop bench slice", description=SLICE_ABOUT)
    p.add_argument("--layers", default=str(d.layers), help="decoder layers of the 8B (1..32)")
    p.add_argument(
        "--vocab",
        default=None,
        help="embedding and head rows (default: Llama-3-8B's 128,256 where it fits the RAM found, "
        "else 8,192)",
    )
    p.add_argument("--threads", default=str(d.threads), help="threads per rank")
    p.add_argument("--ranks", default=str(d.ranks), help="ranks (processes) on this machine")
    p.add_argument("--micro-batch", default=str(d.micro_batch), help="sequences per rank per step")
    p.add_argument("--seq-len", default=str(d.seq_len), help="tokens per sequence")
    p.add_argument("--steps", default=str(d.steps), help="optimizer steps (the first is warm-up, left out)")
    p.add_argument("--gemm-seconds", type=float, default=d.gemm_seconds, help="time per GEMM probe")
    p.add_argument("--cache-dir", default=d.cache_dir)
    p.add_argument("--out-dir", default=d.out_dir)
    p.add_argument(
        "--json-out",
        default=None,
        help="also write the result JSON here (e.g. benchmarks/results/slice.json)",
    )
    p.add_argument("--images-dir", default=str(IMAGES_DIR), help="where bench_slice.png goes")
    return p


def _whole(flag: str, text: str | None) -> int | None:
    """A whole number from the command line, or one error naming the flag and what it accepts."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise WorkshopError(f"{flag} {text!r}: expected a whole number >= 1") from None


@command
def slice_(argv: list[str] | None = None) -> int | None:
    """`workshop bench slice [options]`: check memory, measure, predict, print side by side, write JSON."""
    from workshop.experiments.measure import save
    from workshop.experiments.slice import SliceConfig, run
    from workshop.report.slice import slice_lines
    from workshop.report.training_plots import plot_slice

    a = _slice_parser().parse_args(argv)
    values = {k: _whole("--" + k.replace("_", "-"), getattr(a, k)) for k in _SLICE_INTS}
    d = SliceConfig()
    cfg = SliceConfig(
        **{k: (getattr(d, k) if v is None and k != "vocab" else v) for k, v in values.items()},  # type: ignore[arg-type]
        gemm_seconds=a.gemm_seconds,
        cache_dir=a.cache_dir,
        out_dir=a.out_dir,
    )
    cfg.validate()
    if a.json_out:
        check_output(a.json_out, "--json-out")
    for flag, path in (
        ("--out-dir", a.out_dir),
        ("--images-dir", a.images_dir),
        ("--cache-dir", a.cache_dir),
    ):
        check_output(path, flag, folder=True)
    res = run(cfg)
    for line in slice_lines(res):
        print(line)
    out = save("slice", res, a.out_dir, a.json_out)
    print(f"wrote {out}")
    print(f"figure {plot_slice(res, Path(a.images_dir) / 'bench_slice.png')}")
    return 0
