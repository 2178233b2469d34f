"""Commands that plan: hw (this CPU), instances (the EC2 catalog), plan (time, cost, memory). Each parses its
flags, calls workshop.plan (pure computation: it returns data, or raises WorkshopError on bad input) and
prints."""

from __future__ import annotations

import argparse
import json
import math
import sys
import unicodedata

from workshop.cli.args import comma_list
from workshop.cli.base import command
from workshop.cli.plan_args import count, number, parse
from workshop.errors import WorkshopError, check_output, check_positive
from workshop.lang import _
from workshop.plan import catalog, rates
from workshop.plan.catalog import InstanceRow
from workshop.plan.cost import evaluate, format_table, rank
from workshop.plan.fit import Recommendation, recommend
from workshop.plan.gemm import gemm_benchmark, summarize
from workshop.plan.hardware import detect
from workshop.plan.job import Plan as JobPlan
from workshop.plan.job import from_ranking, save_plan
from workshop.plan.memory import HEADROOM, METHODS, GiB
from workshop.plan.models import SEQ_LEN
from workshop.plan.options import (
    CHECKPOINT_SHARE,
    CPU_ENGINES,
    DEFAULT_FAMILIES,
    DEFAULT_GLOBAL_BATCH,
    MICRO_BATCHES,
    NODE_COUNTS,
    PLANNER_ERROR,
    STACKS,
    STORAGES,
    FixedCosts,
    Options,
    check_range,
)
from workshop.report.predictions import plan_line

# Each command's --help names what it does (the sentence its module's docstring opened with before the move).
HW = "What this CPU can do for bf16 training: AMX detection, the kernel oneDNN really picks, measured GEMM"
INSTANCES = (
    "EC2 instance types as rows a planner can use: cores, memory, EFA, GPUs, and whether the CPU has AMX."
)
PLAN = (
    "How long and how much: the time and cost of a fine-tune on each cluster that holds it, "
    "and what bounds each"
)
MEMORY = "ZeRO memory per rank, from the exact parameter count, and the smallest instance that holds it."


# ---------------------------------------------------------------- hw


@command
def hw(argv: list[str] | None = None) -> int:
    """`workshop hw`: AMX/bf16 detection, oneDNN's kernel, and (unless --no-bench) GEMM TFLOPS vs peak."""
    parser = argparse.ArgumentParser(prog="workshop hw", description=HW)
    counts = comma_list(int, minimum=1, noun="integers >= 1")
    parser.add_argument(
        "--sizes", type=counts, default="512,1024,2048", help="GEMM sizes n (n x n), comma-separated"
    )
    parser.add_argument(
        "--threads", type=counts, default=None, help="thread counts, comma-separated (default: 1,cores)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-bench", action="store_true", help="detection only")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    check_positive("--repeats", args.repeats)
    d = detect()
    out: dict = {"detect": d, "amx": d["amx"]}
    if not args.no_bench:
        results = gemm_benchmark(args.sizes, threads=args.threads, repeats=args.repeats)
        out.update(summarize(d, results))
        out["results"] = [r.as_dict() for r in results]
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(
        f"CPU: {d['cpu_model']} ({d['vendor']}), {d['cores']} cores, clock {d['clock_ghz']} GHz "
        f"[{_(d['clock_source'])}]"
    )
    print(f"AMX: {d['amx']} | avx512_bf16: {d['avx512_bf16']} | torch capability: {d['torch_capability']}")
    print(f"oneDNN ISA: {d['onednn_isa']} | bf16 matmul kernel: {d['onednn_bf16_impl']}")
    print(d["why"])
    if "results" in out:
        _print_gemm(out)
    return 0


def _print_gemm(out: dict) -> None:
    for r in out["results"]:
        print(
            f"  {r['dtype']:>4} n={r['size']:>5} threads={r['threads']}: median {r['median_tflops']:.3f}"
            f" best {r['best_tflops']:.3f} worst {r['worst_tflops']:.3f} TFLOPS"
        )
    if out["note"]:
        print(f"note: {out['note']}")
    print(
        f"bf16 {out['bf16_tflops']:.3f} vs fp32 {out['fp32_tflops']:.3f} TFLOPS "
        f"(x{out['bf16_over_fp32']}); peak here bf16 {out['peak_bf16_tflops']:.2f} "
        f"({out['bf16_pct_of_peak']}%), AMX peak of the same cores {out['peak_amx_bf16_tflops']:.2f} "
        f"({out['bf16_pct_of_amx_peak']}%)"
    )


# ---------------------------------------------------------------- instances


@command
def instances(argv: list[str] | None = None) -> int:
    """`workshop instances`: EC2 instance types (AWS with credentials, else moto's offline catalog)."""
    parser = argparse.ArgumentParser(prog="workshop instances", description=INSTANCES)
    parser.add_argument(
        "--family",
        action="append",
        metavar="GLOB",
        help=f"instance family (glob ok); repeatable; default: {' '.join(catalog.DEFAULT_FAMILIES)}",
    )
    parser.add_argument("--size", action="append", metavar="GLOB", help="size such as 48xlarge (glob ok)")
    parser.add_argument("--efa", action="store_true", help="only types that support EFA")
    parser.add_argument(
        "--original-query",
        action="store_true",
        help="the original workshop's query: instance-type *7i* with EFA (ignores --family/--size)",
    )
    parser.add_argument("--type", dest="instance_type", help="describe one instance type")
    parser.add_argument(
        "--source", choices=catalog.SOURCES, default=None, help="where to ask (default: auto)"
    )
    parser.add_argument("--region", default=catalog.DEFAULT_REGION)
    parser.add_argument("--json", action="store_true", help="print a JSON list of objects")
    args = parser.parse_args(argv)
    rows, answered = _instance_rows(args)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
        return 0
    print(catalog.format_table(rows))
    if answered:
        print("\n" + _("{n} instance types; source: {source}").format(n=len(rows), source=answered))
    print(_("prices: {source}").format(source=catalog.PRICE_SOURCE))
    return 0


def _instance_rows(args: argparse.Namespace) -> tuple[list[InstanceRow], str]:
    if args.instance_type is not None:
        return [catalog.instance_info(args.instance_type, region=args.region, source=args.source)], ""
    if args.original_query:
        return catalog.describe_instance_types(
            catalog.ORIGINAL_FILTERS, region=args.region, source=args.source
        )
    return catalog.list_instances(
        args.family or catalog.DEFAULT_FAMILIES,
        sizes=args.size,
        efa=args.efa,
        region=args.region,
        source=args.source,
    )


# ---------------------------------------------------------------- plan


@command
def plan(argv: list[str] | None = None) -> int:
    """`workshop plan`: time, cost and bound of every plan that fits (`--memory`: memory per rank only)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--memory" in argv:
        return memory_plan([a for a in argv if a != "--memory"])
    args = parse(_plan_parser(), argv)
    opts = options_from_args(args)
    plans = [evaluate(args.instance, args.nodes or 1, opts)] if args.instance else rank(opts)
    picked = _picked(plans, opts, args)
    if args.json:
        print(json.dumps({**picked.to_dict(), "plans": [p.to_dict() for p in plans]}, indent=2))
        return 0
    print(
        _(
            "{model}, {tokens:.3g} tokens, {batch:,} tokens per optimizer step ({steps:,} steps), seq {seq}, "
            "GPU stack {stack}, {method} fine-tuning; "
            "USD = fixed $ (start-up, weight download, init, final save: once per node) "
            "+ save $ (checkpoint writes: save h of the hours) + tokens $ (steps, storage); "
            "= ties within the planner's {error:.0%} error, ordered by fewer nodes then lower cost; "
            "* = time-vs-cost Pareto front; o = overridden price"
        ).format(
            model=opts.model,
            tokens=opts.tokens,
            batch=opts.global_batch,
            steps=math.ceil(opts.tokens / opts.global_batch),
            seq=opts.seq_len,
            stack=opts.stack,
            method=opts.method,
            error=PLANNER_ERROR,
        )
    )
    print(format_table(plans, args.top))
    for i, p in enumerate(plans[: args.top], 1):
        if p.hint:
            print(f"{i:>2} {p.label}: {p.hint}")
    print(_("picked row {row}: {plan}").format(row=args.pick, plan=plan_line(picked)))
    if args.out:
        print(
            _("wrote {path} (workshop render --plan {out} --out DIR)").format(
                path=save_plan(picked, args.out), out=args.out
            )
        )
    unpriced = sorted({p.instance_type for p in plans if p.usd is None})
    if unpriced:
        print(
            _(
                "no price known (listed last, never on the front): {types}; --price TYPE=USD ranks them"
            ).format(types=", ".join(unpriced))
        )
    return 0


def _picked(plans: list, opts: Options, args: argparse.Namespace) -> JobPlan:
    """The plan file's Plan: row --pick (1 = the planner's first) as a Job + Placement + prediction; with
    --out, written only after every check passed."""
    check_range("--pick", args.pick, 1, len(plans))
    if args.out:
        check_output(args.out, "--out")
    return from_ranking(
        plans,
        opts,
        args.pick - 1,
        weights=args.weights,
        capacity_type="spot" if args.spot else "on-demand",
    )


def _fixed_costs(args: argparse.Namespace) -> FixedCosts:
    """Costs beside the steps: one checkpoint policy (a share, or --checkpoint-minutes) and the overrides."""
    minutes, share = args.checkpoint_minutes, args.checkpoint_share
    if minutes is not None and share is not None:
        raise WorkshopError(
            f"--checkpoint-minutes {minutes:g} and --checkpoint-share {share:g}: give one of them "
            f"(default: --checkpoint-share {CHECKPOINT_SHARE:g})"
        )
    fixed = FixedCosts(  # the workbook's one checkpoint policy unless a flag asks for another
        checkpoint_minutes=rates.CHECKPOINT_MINUTES if minutes is None else minutes,
        checkpoint_share=None if minutes is not None else share or CHECKPOINT_SHARE,
        storage=args.storage,
        **{
            k: rates.Rate(v, unit, "override", flag)
            for k, v, unit, flag in (
                ("startup_s", args.startup_s, "s per node", "--startup-s"),
                ("download_gbytes_per_s", args.download_gbps, "GB/s per node", "--download-gbps"),
                ("init_s", args.init_s, "s", "--init-s"),
                ("storage_gbytes_per_s", args.storage_gbps, "GB/s", "--storage-gbps"),
            )
            if v is not None
        },
    )
    return fixed


def options_from_args(args: argparse.Namespace) -> Options:
    """`workshop plan`'s flags as the ranking's Options (a bad value: one line naming it)."""
    check_range("--top", args.top, 1, 10_000)
    fixed = _fixed_costs(args)
    opts = Options(
        model=args.model,
        tokens=args.tokens,
        families=tuple(args.family or DEFAULT_FAMILIES),
        nodes=(args.nodes,) if args.nodes is not None else NODE_COUNTS,
        procs_per_node=args.procs_per_node,
        zero_stages=(args.zero,) if args.zero is not None else (3, 2, 1, 0),
        micro_batches=(args.micro_batch,) if args.micro_batch is not None else MICRO_BATCHES,
        global_batch=args.global_batch,
        seq_len=args.seq_len,
        grad_ckpts=(args.grad_ckpt,) if args.grad_ckpt is not None else (False, True),
        headroom=args.headroom,
        offload=args.offload,
        placement_group=args.placement_group,
        ena_express=args.ena_express,
        stack=args.stack,
        cpu_engine=args.cpu_engine,
        ceiling=args.ceiling,
        prices=rates.parse_prices(args.price),
        max_hours=args.max_hours,
        budget=args.budget,
        source=args.source,
        fixed=fixed,
        method=args.method,
        eval_share=args.eval_share,
    )
    for which, unit in (("cpu", "of AMX bf16 peak"), ("gpu", "of dense bf16 peak")):
        value = getattr(args, f"{which}_efficiency")
        if value is not None:
            check_range(f"--{which}-efficiency", value, 0, 1, low_open=True)
            setattr(opts, f"{which}_efficiency", rates.Rate(value, unit, "override", f"--{which}-efficiency"))
    return opts


def _whole_number(text: str) -> int:
    """A token count as people write it (8192, 8_192, 1e5): a whole number, else argparse's one-line error."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens")
    return int(value)


def _plan_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workshop plan", description=PLAN)
    p.add_argument("--model", default="llama-3-8b")
    p.add_argument(
        "--tokens", type=number("--tokens", "tokens"), default=1e8, help="tokens to train (default 1e8)"
    )
    p.add_argument(
        "--family",
        action="append",
        metavar="GLOB",
        help=f"instance families (default {' '.join(DEFAULT_FAMILIES)})",
    )
    p.add_argument("--instance", help="evaluate one instance type (with --nodes)")
    p.add_argument(
        "--nodes", type=count("--nodes", 1, 1000), default=None, help="node count (default: 1, 2, 4, 8)"
    )
    p.add_argument(
        "--procs-per-node",
        type=count("--procs-per-node", 1, 1024),
        default=None,
        help="ranks per node (default: 1 on CPU, every GPU)",
    )
    p.add_argument(
        "--zero",
        type=count("--zero", 0, 3),
        default=None,
        help="ZeRO stage 0-3 (default: the cheapest that fits)",
    )
    p.add_argument(
        "--micro-batch",
        type=count("--micro-batch", 1, 1024),
        default=None,
        help="default: the cheapest of 1, 2, 4, 8, 16",
    )
    p.add_argument(
        "--global-batch",
        type=_whole_number,
        default=DEFAULT_GLOBAL_BATCH,
        help=f"tokens per optimizer step, the same on every plan (default {DEFAULT_GLOBAL_BATCH:,}: the "
        "fine-tune's own, 4 ranks x 1 x 4 x 512)",
    )
    p.add_argument("--seq-len", type=count("--seq-len", 1, 1 << 20), default=SEQ_LEN)
    _add_method_args(p)
    _add_run_cost_args(p)
    return p


def _add_method_args(p: argparse.ArgumentParser) -> None:
    """The flags after --seq-len: how the model is trained, on what stack, calibrated by what."""
    p.add_argument(
        "--method",
        choices=METHODS,
        default="full",
        help="full fine-tuning, or lora: rank-8 adapters on every linear layer, the weights frozen in bf16",
    )
    p.add_argument(
        "--eval-share",
        type=number("--eval-share", "eval_share", zero=True),
        default=0.0,
        help="held-out tokens evaluated per trained token (0.02: a 2%% split once an epoch); forward only",
    )
    p.add_argument("--stack", choices=STACKS, default="hf-deepspeed-bf16", help="GPU software stack")
    p.add_argument("--cpu-engine", choices=CPU_ENGINES, default="deepspeed", help="the CPU job's engine")
    p.add_argument(
        "--ceiling",
        "--calibration",
        dest="ceiling",
        default=None,
        metavar="PATH",
        help="calibrate the CPU rate: a ceiling.json (python -m workshop bench ceiling --levers "
        "no_compile,zero3 --json-out PATH) or a slice.json (python -m workshop bench slice --json-out PATH) "
        "checked before use; measured without AMX, it is carried to AMX by its compute's share of its own "
        "GEMM ceiling; default: benchmarks/results/slice.json (--cpu-engine deepspeed), ceiling.json "
        "(ddp-compile)",
    )


def _add_run_cost_args(p: argparse.ArgumentParser) -> None:
    """The flags after --ceiling: the run's fixed costs (start-up, download, init, checkpoints), then the
    constraints and the output (in --help order)."""
    p.add_argument(
        "--startup-s",
        type=number("--startup-s", "startup_s"),
        default=None,
        help="node start-up seconds (default: image.json)",
    )
    p.add_argument(
        "--download-gbps",
        type=number("--download-gbps", "download_gbps"),
        default=None,
        help="weight download GB/s per node (0.5)",
    )
    p.add_argument(
        "--init-s",
        type=number("--init-s", "init_s"),
        default=None,
        help="process group + engine init seconds (60)",
    )
    p.add_argument(
        "--checkpoint-minutes",
        type=number("--checkpoint-minutes", "checkpoint_minutes", zero=True),
        default=None,
        help="instead of --checkpoint-share: a checkpoint every this many minutes of training; 0: only the "
        "final save",
    )
    p.add_argument(
        "--checkpoint-share",
        type=number("--checkpoint-share", "checkpoint_share"),
        default=None,
        help="the interval that keeps checkpoint writes at this share of the wall time at the storage's "
        "write rate (0.05 = 5 %%; the default: plan.options.CHECKPOINT_SHARE)",
    )
    p.add_argument("--storage", choices=STORAGES, default="fsx", help="where checkpoints go")
    p.add_argument(
        "--storage-gbps",
        type=number("--storage-gbps", "storage_gbps"),
        default=None,
        help="checkpoint write GB/s (default: storage's)",
    )
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None, help="default: either")
    _add_constraint_args(p)
    _add_output_args(p)


def _add_constraint_args(p: argparse.ArgumentParser) -> None:
    """The flags after --grad-ckpt: memory headroom, time and money limits, network, efficiencies, prices."""
    p.add_argument("--headroom", type=number("--headroom", "headroom"), default=HEADROOM)
    p.add_argument("--max-hours", type=number("--max-hours", "max_hours"), default=None)
    p.add_argument("--budget", type=number("--budget", "budget"), default=None, help="USD")
    p.add_argument(
        "--placement-group", action="store_true", help="cluster placement group: 10 Gbps per TCP flow"
    )
    p.add_argument("--ena-express", action="store_true", help="ENA Express: 25 Gbps per TCP flow")
    p.add_argument(
        "--cpu-efficiency",
        type=number("--cpu-efficiency", "efficiency"),
        default=None,
        help="fraction of AMX peak, 0.001-1 (default: measured)",
    )
    p.add_argument(
        "--gpu-efficiency",
        type=number("--gpu-efficiency", "efficiency"),
        default=None,
        help="fraction of dense bf16 peak, 0.001-1 (default: --stack)",
    )
    p.add_argument("--price", action="append", metavar="TYPE=USD", help="override an hourly price")
    p.add_argument("--source", choices=catalog.SOURCES, default=None, help="catalog source (default: auto)")


def _add_output_args(p: argparse.ArgumentParser) -> None:
    """The last flags: what is shown, written and picked, and how the picked plan runs."""
    p.add_argument(
        "--top",
        type=count("--top", 1, 10_000),
        default=10,
        help="rows in the table (the JSON has every plan)",
    )
    p.add_argument(
        "--offload",
        action="store_true",
        help="also try GPU offload (its host work is not modelled: optimistic)",
    )
    p.add_argument("--memory", action="store_true", help="the memory-only planner (workshop.plan.memory)")
    p.add_argument("--json", action="store_true", help="print the picked plan file (JSON) and every plan")
    p.add_argument(
        "--out", metavar="FILE", default=None, help="write the picked plan file (workshop render --plan)"
    )
    p.add_argument(
        "--pick",
        type=count("--pick", 1, 10_000),
        default=1,
        help="which row of the ranking is the plan (default 1)",
    )
    p.add_argument("--weights", choices=("hub", "random"), default="hub", help="the hub's weights or random")
    p.add_argument(
        "--spot",
        action="store_true",
        help="a spot plan: its pool admits spot capacity only (still priced on demand: the planner has no "
        "spot prices; the TrainJob resumes from its checkpoints with --resume)",
    )


def memory_plan(argv: list[str]) -> int:
    """`workshop plan --memory`: per-rank bytes and the smallest instance type that holds them."""
    args = parse(_memory_parser(), argv)
    rec = recommend(
        args.model,
        nodes=args.nodes,
        procs_per_node=args.procs_per_node,
        families=args.family or ("c7i", "m7i", "r7i"),
        zero_stage=args.zero,
        offload_optimizer=args.offload_optimizer,
        offload_param=args.offload_param,
        micro_batch=args.micro_batch,
        seq_len=args.seq_len,
        grad_ckpt=args.grad_ckpt,
        headroom=args.headroom,
        efa=args.efa,
        source=args.source,
        method=args.method,
    )
    if args.json:
        mp = rec.plan
        out = {
            "params": mp.params,
            "per_rank_bytes": mp.total,
            "components": mp.components,
            "phases": mp.phases(),
            "placement": mp.placement,
            "host_total_bytes": mp.host_total,
            "recommendation": rec.as_dict(),
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    _print_recommendation(rec)
    return 0


def _print_recommendation(rec: Recommendation) -> None:
    mp = rec.plan
    print(
        _("{model}: {params:,} parameters, ZeRO-{zero}, world size {world}").format(
            model=rec.model, params=mp.params, zero=mp.zero_stage, world=mp.world_size
        )
    )
    for k, v in mp.components.items():
        print(f"  {k:<22} {v / GiB:8.2f} GiB  ({mp.placement[k]})")
    total = _("per-rank total")  # padded by terminal columns: a Hangul syllable takes two
    pad = 22 - sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in total)
    print(f"  {total}{' ' * max(0, pad)} {mp.total / GiB:8.2f} GiB")
    print(f"  {mp.phase_note()}")
    print(
        _(
            "-> {nodes} x {type}, {ppn} rank(s)/node; pod requests cpu {cpu}, memory {memory}, "
            "/dev/shm {shm}; ${usd}/h on demand"
        ).format(
            nodes=rec.nodes,
            type=rec.instance_type,
            ppn=rec.procs_per_node,
            cpu=rec.cpu_request,
            memory=rec.memory_request,
            shm=rec.shm_size,
            usd=rec.hourly_cost_usd if rec.hourly_cost_usd is not None else "?",
        )
    )
    print(f"   {rec.reason}")
    print("   " + _("acceptable: {types}").format(types=", ".join(rec.instance_types)))


def _memory_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workshop plan", description=MEMORY)
    parser.add_argument("--model", default="llama-3-8b")
    parser.add_argument(
        "--nodes",
        type=count("--nodes", 1, 1000),
        default=None,
        help="node count (default: the fewest that fit)",
    )
    parser.add_argument(
        "--procs-per-node",
        type=count("--procs-per-node", 1, 1024),
        default=None,
        help="ranks per node (default: 1 on CPU, all GPUs on GPU types)",
    )
    parser.add_argument("--zero", type=count("--zero", 0, 3), default=3, help="ZeRO stage 0-3")
    parser.add_argument("--offload-optimizer", action="store_true")
    parser.add_argument("--offload-param", action="store_true")
    parser.add_argument("--micro-batch", type=count("--micro-batch", 1, 1024), default=1)
    parser.add_argument("--seq-len", type=count("--seq-len", 1, 1 << 20), default=SEQ_LEN)
    parser.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing")
    parser.add_argument("--method", choices=METHODS, default="full", help="full fine-tuning or lora")
    parser.add_argument(
        "--family", action="append", metavar="GLOB", help="instance families (default c7i m7i r7i)"
    )
    parser.add_argument("--headroom", type=number("--headroom", "headroom"), default=HEADROOM)
    parser.add_argument(
        "--efa",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="require EFA (default: only when nodes > 1)",
    )
    parser.add_argument(
        "--source", choices=catalog.SOURCES, default=None, help="catalog source (default: auto)"
    )
    parser.add_argument("--json", action="store_true")
    return parser
