"""`workshop load checkpoint|run|bench|verify`, and the internal `worker`/`pitfall` commands torchrun
starts."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict
from pathlib import Path

from workshop.errors import WorkshopError, check_output, comma_list, report
from workshop.experiments.loading.checkpoint import (
    DTYPES,
    checkpoint_preset,
    verify_checkpoint,
    write_checkpoint,
)
from workshop.experiments.loading.experiment import bench, format_table, run_experiment, summarize
from workshop.experiments.loading.pitfalls import run_pitfall_here
from workshop.experiments.loading.worker import METHODS, run_worker
from workshop.train.shm import release_shm_buffers


def _shard_size(text: str) -> str:
    """A shard size save_pretrained accepts (200MB, 2GB; KB, MB, GB, TB), checked before a model is built."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*[kmgt]b", text.strip(), re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 200MB or 2GB (KB, MB, GB, TB), got {text!r}"
        )
    return text


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
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
    w = sub.add_parser("worker", help="(internal) one rank of one method; run under torchrun")
    w.add_argument("--method", required=True)
    w.add_argument("--checkpoint", required=True)
    w.add_argument("--out-dir", required=True)
    w.add_argument("--dtype", default="bf16")
    w.add_argument("--low-cpu-mem-usage", type=_bool, default=None)
    w.add_argument("--no-verify", action="store_true")
    pf = sub.add_parser("pitfall", help="(internal) one pitfall in this process; prints what happened")
    pf.add_argument("--name", required=True)
    pf.add_argument("--checkpoint", required=True)
    pf.add_argument("--out-file", required=True)
    pf.add_argument("--rank0-only", action="store_true", help="only rank 0 writes the result")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "checkpoint":
            check_output(args.out, "--out", folder=True)
            path = write_checkpoint(
                args.out, args.model, dtype=args.dtype, max_shard_size=args.max_shard_size
            )
            print(json.dumps(asdict(verify_checkpoint(path))))
        elif args.cmd == "verify":
            print(json.dumps(asdict(verify_checkpoint(args.checkpoint))))
        elif args.cmd in ("run", "bench"):
            methods, ranks = args.methods, args.ranks
            if args.json_out:  # the rows are written at the end: a wrong path must not cost the whole run
                check_output(args.json_out, "--json-out")
            if args.cmd == "bench":
                if args.work_dir:
                    check_output(args.work_dir, "--work-dir", folder=True)
                res = bench(
                    args.json_out,
                    model=args.model,
                    world_sizes=ranks,
                    methods=methods,
                    work_dir=args.work_dir,
                    dtype=args.dtype,
                    max_shard_size=args.max_shard_size,
                )
                print(format_table(res["rows"]))
                print(json.dumps(res["ratio_vs_naive"]))
            else:
                rows = run_experiment(
                    args.checkpoint, methods=methods, world_sizes=ranks, out_dir=args.out_dir
                )
                summary = summarize(rows, model=checkpoint_preset(args.checkpoint))
                print(format_table(summary))
                if args.json_out:
                    Path(args.json_out).write_text(json.dumps(summary, indent=1))
        elif args.cmd == "worker":
            try:
                run_worker(
                    args.method,
                    args.checkpoint,
                    args.out_dir,
                    dtype=args.dtype,
                    low_cpu_mem_usage=args.low_cpu_mem_usage,
                    verify=not args.no_verify,
                )
            finally:  # os._exit below skips atexit: free DeepSpeed's /dev/shm buffers here, however it went
                release_shm_buffers()
            # The report is on disk and the process group is gone. Skip interpreter teardown: a DeepSpeed/gloo
            # C++ thread left joinable after zero.Init can abort the exit ("terminate called without an active
            # exception", SIGABRT, seen once in CI), which would fail a measurement that already succeeded.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        elif args.cmd == "pitfall":
            if not args.rank0_only or os.environ.get("RANK", "0") == "0":
                out_file = args.out_file
            else:
                out_file = os.devnull
            try:  # the pitfalls fail on purpose; their DeepSpeed buffers must not outlive them
                print(json.dumps(run_pitfall_here(args.name, args.checkpoint, out_file)))
            finally:
                release_shm_buffers()
    except WorkshopError as exc:
        return report(exc)
    return 0
