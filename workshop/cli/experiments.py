"""Commands that run the experiments: load, netsim, comms."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path

from workshop.cli.args import comma_list, summary
from workshop.cli.base import command
from workshop.errors import check_output, check_positive


def _shard_size(text: str) -> str:
    """A shard size save_pretrained accepts (200MB, 2GB; KB, MB, GB, TB), checked before a model is built."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*[kmgt]b", text.strip(), re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 200MB or 2GB (KB, MB, GB, TB), got {text!r}"
        )
    return text


def _load_parser() -> argparse.ArgumentParser:
    from workshop.experiments.loading.checkpoint import DTYPES
    from workshop.experiments.loading.worker import METHODS

    parser = argparse.ArgumentParser(
        prog="workshop load",
        description="Sharded loading, measured: naive vs meta device vs ZeRO-3 partitioned construction.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    ranks = comma_list(int, minimum=1, noun="integers >= 1")
    methods = comma_list(choices=METHODS, noun="methods")
    c = sub.add_parser(
        "checkpoint", help="write a sharded safetensors checkpoint of a preset (random weights)"
    )
    c.add_argument("--model", default="tiny", help="preset name (tiny, small, medium, ...)")
    c.add_argument("--out", required=True, help="directory to write")
    c.add_argument("--dtype", default="bf16", choices=DTYPES)
    c.add_argument("--max-shard-size", type=_shard_size, default="200MB")
    r = sub.add_parser("run", help="load a checkpoint every way on 1..N ranks and print the table")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("--methods", type=methods, default=",".join(METHODS), help=f"from: {', '.join(METHODS)}")
    r.add_argument("--ranks", type=ranks, default="1,2", help="world sizes, comma separated")
    r.add_argument("--out-dir", default="out/loading")
    r.add_argument("--json-out", help="also write the rows here")
    b = sub.add_parser("bench", help="the benchmark: write the checkpoint, run everything, write JSON")
    b.add_argument("--json-out", required=True)
    b.add_argument("--model", default="medium")
    b.add_argument("--ranks", type=ranks, default="1,2", help="world sizes, comma separated")
    b.add_argument("--methods", type=methods, default=",".join(METHODS), help=f"from: {', '.join(METHODS)}")
    b.add_argument("--work-dir", help="checkpoint + run logs (default ~/.cache/workshop/loading)")
    b.add_argument("--dtype", default="bf16", choices=DTYPES)
    b.add_argument("--max-shard-size", type=_shard_size, default="200MB")
    v = sub.add_parser("verify", help="check a checkpoint's config, index and shards")
    v.add_argument("--checkpoint", required=True)
    return parser


def _load_runs(args: argparse.Namespace) -> None:
    """`load run` and `load bench`: every method on every world size, the table and (bench) the ratios."""
    from workshop.experiments.loading.checkpoint import checkpoint_preset
    from workshop.experiments.loading.experiment import bench, format_table, run_experiment, summarize

    if args.json_out:  # the rows are written at the end: a wrong path must not cost the whole run
        check_output(args.json_out, "--json-out")
    if args.cmd == "bench":
        if args.work_dir:
            check_output(args.work_dir, "--work-dir", folder=True)
        res = bench(
            args.json_out,
            model=args.model,
            world_sizes=args.ranks,
            methods=args.methods,
            work_dir=args.work_dir,
            dtype=args.dtype,
            max_shard_size=args.max_shard_size,
        )
        print(format_table(res["rows"]))
        print(json.dumps(res["ratio_vs_naive"]))
        return
    rows = run_experiment(args.checkpoint, methods=args.methods, world_sizes=args.ranks, out_dir=args.out_dir)
    summary = summarize(rows, model=checkpoint_preset(args.checkpoint))
    print(format_table(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))


@command
def load(argv: list[str] | None = None) -> int | None:
    """`workshop load checkpoint|run|bench|verify`: the sharded-loading experiment."""
    from workshop.experiments.loading.checkpoint import verify_checkpoint, write_checkpoint

    args = _load_parser().parse_args(argv)
    if args.cmd == "checkpoint":
        check_output(args.out, "--out", folder=True)
        path = write_checkpoint(args.out, args.model, dtype=args.dtype, max_shard_size=args.max_shard_size)
        print(json.dumps(asdict(verify_checkpoint(path))))
    elif args.cmd == "verify":
        print(json.dumps(asdict(verify_checkpoint(args.checkpoint))))
    else:
        _load_runs(args)
    return 0


def _netsim_parser() -> argparse.ArgumentParser:
    from workshop.launch import netsim as experiment

    p = argparse.ArgumentParser(
        prog="workshop netsim",
        description=summary(experiment.__doc__),
        epilog="Anything after `--` goes to the training entry point "
        "(default: " + " ".join(experiment.default_train_args().to_argv()) + ").",
    )
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs-per-node", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch/OMP threads per rank")
    p.add_argument(
        "--rate",
        action="append",
        dest="rates",
        metavar="RATE",
        help="tc rate cap per node, repeatable (default: 10gbit and 1gbit); 'none' = uncapped",
    )
    p.add_argument("--mode", choices=experiment.MODES, default="auto")
    p.add_argument("--subnet", default="10.77.0.0/24")
    p.add_argument("--out-dir", default="out/netsim")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per run before the nodes are stopped"
    )
    p.add_argument("--json", default=None, help="write the report here (e.g. benchmarks/results/netsim.json)")
    p.add_argument("--plot", default=None, help="write a PNG of step time and bytes sent per cap here")
    p.add_argument("--cleanup", action="store_true", help="only delete stale namespaces from killed runs")
    return p


@command
def netsim(argv: list[str] | None = None) -> int:
    from workshop.launch import netsim as experiment
    from workshop.launch.netns import cleanup_stale
    from workshop.report.plots import plot_netsim

    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    argv, train_args = argv[:cut], argv[cut + 1 :]
    args = _netsim_parser().parse_args(argv)
    if args.cleanup:
        print("deleted:", ", ".join(cleanup_stale()) or "nothing")
        return 0
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            check_output(path, flag)
    cfg = experiment.NetSimConfig(
        nodes=args.nodes,
        procs_per_node=args.procs_per_node,
        threads_per_rank=args.threads,
        rates=args.rates or ["10gbit", "1gbit"],
        mode=args.mode,
        subnet=args.subnet,
        out_dir=Path(args.out_dir),
        timeout_s=args.timeout,
        train_args=train_args or experiment.default_train_args(),
    )
    report = experiment.run(cfg)
    for row in report.table():
        print(json.dumps(row))
    if args.json:
        print("wrote", report.to_json(args.json))
    if args.plot:
        print("wrote", plot_netsim(report.table(), args.plot))
    return 0 if all(r.ok for r in report.results) else 1


def _comms_parser() -> argparse.ArgumentParser:
    from workshop.experiments.comms.collectives import SIZES_MB
    from workshop.experiments.comms.results import NETSIM_RESULTS, RESULTS
    from workshop.plan.models import PRESETS

    p = argparse.ArgumentParser(
        prog="workshop comms",
        description="How many bytes ZeRO moves per step, over which wire, and what that costs.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model", help="predict the original workshop's GPU topologies and check the claims")
    m.add_argument("--overlap", type=float, default=0.0)
    m.add_argument("--efa-per-pod", type=int, default=1)
    b = sub.add_parser("bench", help="collective bus bandwidth over message sizes")
    b.add_argument("--backend", default="gloo", help="gloo (CPU) | nccl (GPU)")
    b.add_argument("--nproc", type=int, default=2)
    b.add_argument("--sizes-mb", type=float, nargs="+", default=list(SIZES_MB))
    b.add_argument("--iters", type=int, default=5)
    loc = sub.add_parser("local", help="bench + local ZeRO-3 step times vs the model")
    loc.add_argument(
        "--models",
        nargs="+",
        default=["tiny", "small"],
        choices=list(PRESETS),
        metavar="PRESET",
        help=f"presets, from: {', '.join(PRESETS)}",
    )
    loc.add_argument("--steps", type=int, default=10)
    ns = sub.add_parser(
        "netsim", help="bench inside chapter 05's rate-capped namespaces; check its step times"
    )
    ns.add_argument("--rates", nargs="+", default=["10gbit", "1gbit"])
    ns.add_argument("--netsim-json", default=str(NETSIM_RESULTS), help="workshop netsim --json output")
    for s in (m, b, loc, ns):
        s.add_argument("--out", default=str(RESULTS), help="JSON file (merged)")
    return p


def _print_comms(res: dict) -> None:
    """Each part's verdict lines: the model's p4d ratio, the bench's fit, the rate caps', the local runs'."""
    if "model" in res:
        c = res["model"]["checks"]
        print(
            f"p4d ratio predicted {c['p4d_ratio_predicted']:.2f} vs measured "
            f"{c['p4d_ratio_measured']:.2f} "
            f"({c['p4d_ratio_error']:+.0%}); ordering ok: {c['ordering_ok']}"
        )
    elif "netsim" in res:
        for row in res["netsim"]["rows"]:
            print(
                f"{row['rate']:8s} measured {row['measured_s']:.3f} s  "
                f"model {row['predicted_s']:.3f} s "
                f"({row['error']:+.0%}); line rate only {row['line_rate_predicted_s']:.3f} s"
            )
    elif "local" in res:
        for r in res["local"]:
            print(
                f"{r['model']:6s} offload={r['offload']!s:5s} predicted {r['predicted_s']:.3f} s "
                f"measured {r['measured_s']:.3f} s ({r['error']:+.0%})"
            )
    else:
        for op, f in res["bench"]["fit"].items():
            print(f"{op:15s} {f['gbytes_per_s']:.2f} GB/s  latency {f['alpha_s'] * 1e3:.2f} ms")


@command
def comms(argv: list[str] | None = None) -> int | None:
    """`workshop comms model|bench|local|netsim`: run a part, print its verdict, merge it into a JSON file."""
    from workshop.experiments.comms import results
    from workshop.experiments.comms.collectives import run_collective_bench

    a = _comms_parser().parse_args(argv)
    old = results.merged_into(a.out)
    check_positive("--efa-per-pod", getattr(a, "efa_per_pod", 1))
    check_positive("--steps", getattr(a, "steps", 1))
    check_positive("--iters", getattr(a, "iters", 1))
    res: results.CommsResult
    if a.cmd == "model":
        res = {"model": results.model_report(a.overlap, a.efa_per_pod)}
    elif a.cmd == "bench":
        res = {
            "bench": run_collective_bench(
                backend=a.backend, nproc=a.nproc, sizes_mb=a.sizes_mb, iters=a.iters
            )
        }
    elif a.cmd == "netsim":
        res = results.netsim_part(a.rates, results.read_netsim(a.netsim_json))
    else:
        res = results.local_part(a.models, a.steps)
    _print_comms(dict(res))
    print(f"wrote {results.write_result(res, Path(a.out), old)}")
    return 0
