"""Commands that run the experiments: load, netsim, comms."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workshop.cli.base import command
from workshop.errors import check_output


@command
def load(argv: list[str] | None = None) -> int | None:
    from workshop.experiments.loading.cli import main  # moved here by its owner: parse, call, print

    return main(argv)


def _netsim_parser() -> argparse.ArgumentParser:
    from workshop.launch import netsim as experiment

    p = argparse.ArgumentParser(
        prog="workshop netsim",
        description=(experiment.__doc__ or "").split("\n\n")[0],
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


@command
def comms(argv: list[str] | None = None) -> int | None:
    from workshop.experiments.comms.cli import main  # moved here by its owner: parse, call, print

    return main(argv)
