"""The GEMM ceiling: the model's own matmul shapes timed on every rank at once (child processes).

`python -m workshop.experiments.ceiling --child JSON` is one rank (`gemm_child`); `gemm_ceiling` starts
them and adds their rates up."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workshop.errors import (
    WorkshopError,
    check_choice,
)
from workshop.experiments.ceiling.shapes import Linear, distinct_shapes
from workshop.launch import ledger
from workshop.launch.torchrun import rank_env
from workshop.plan.timer import seconds_per_call

DEVICES = ("cpu", "cuda")

_TORCH_DTYPES = ("fp32", "bf16")


def gemm_child(spec: dict) -> dict:
    """One rank's share of the ceiling: the three training GEMMs of every distinct shape, timed after a
    barrier.

    All ranks start timing together (a file per rank in `ready_dir`), so they contend for the same memory and
    caches the training ranks do. Each GEMM repeats for at least `min_seconds`.
    """
    import torch

    rank, nproc = spec["rank"], spec["nproc"]
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    dev = torch.device(f"cuda:{rank}" if spec["device"] == "cuda" else "cpu")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[spec["dtype"]]

    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else None
    m = spec["tokens"]
    cases = []
    for inp, out in spec["shapes"]:
        x = torch.randn(m, inp, dtype=dtype, device=dev)
        w = torch.randn(out, inp, dtype=dtype, device=dev)
        dy = torch.randn(m, out, dtype=dtype, device=dev)
        cases.append(
            (
                (inp, out),
                {
                    "fwd": lambda x=x, w=w: x @ w.t(),
                    "dx": lambda dy=dy, w=w: dy @ w,
                    "dw": lambda dy=dy, x=x: dy.t() @ x,
                },
            )
        )
        for fn in cases[-1][1].values():  # warm-up: oneDNN/cuBLAS kernel selection and first-touch pages
            fn()
    if sync is not None:
        sync()
    ready = Path(spec["ready_dir"])
    (ready / f"rank{rank}").touch()
    deadline = time.time() + 300
    while len(list(ready.glob("rank*"))) < nproc:
        if time.time() > deadline:
            raise WorkshopError(f"GEMM probe rank {rank}: the other ranks never got ready in {ready}")
        time.sleep(0.01)
    res = []
    for (inp, out), fns in cases:
        row = {"inp": inp, "out": out}
        for key, fn in fns.items():
            row[f"{key}_s"] = seconds_per_call(fn, min_seconds=spec["min_seconds"], min_calls=2, sync=sync)
        res.append(row)
    return {"rank": rank, "threads": torch.get_num_threads(), "shapes": res}


def ceiling_from_children(children: list[dict], shapes: list[Linear], tokens: int) -> dict:
    """The machine's matmul ceiling from every rank's timings: ranks run at once, so their rates add up.

    A rank's rate is the step's linear-layer FLOPs over the time its GEMMs alone take (each shape weighted
    by how often the model uses it); per shape, the same.
    """
    flops = sum(s.train_flops(tokens) for s in shapes)
    times = [
        {(r["inp"], r["out"]): r["fwd_s"] + r["dx_s"] + r["dw_s"] for r in c["shapes"]} for c in children
    ]
    total_rate = sum(flops / sum(t[(s.inp, s.out)] * s.count for s in shapes) for t in times)
    per_shape = []
    for (inp, out), names in distinct_shapes(shapes).items():
        once = Linear(names[0], inp, out, 1).train_flops(tokens)
        rate = sum(once / t[(inp, out)] for t in times)
        per_shape.append({"weights": names, "gemm": f"{tokens}x{inp}x{out}", "tflops": rate / 1e12})
    return {"tflops": total_rate / 1e12, "linear_flops_per_step_per_rank": flops, "per_shape": per_shape}


def gemm_ceiling(
    shapes: list[Linear],
    *,
    tokens: int,
    dtype: str,
    nproc: int,
    threads: int | None,
    device: str = "cpu",
    min_seconds: float = 0.25,
    timeout: float = 600,
) -> dict:
    """Start `nproc` GEMM ranks at once (the environment the training ranks get) and combine their timings."""

    check_choice("dtype", dtype, _TORCH_DTYPES)
    check_choice("device", device, DEVICES)
    cpu0, t0 = ledger.children_cpu_s(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="workshop-ceiling-") as ready:
        procs = []
        for rank in range(nproc):
            spec = {
                "rank": rank,
                "nproc": nproc,
                "threads": threads,
                "device": device,
                "dtype": dtype,
                "tokens": tokens,
                "shapes": list(distinct_shapes(shapes)),
                "min_seconds": min_seconds,
                "ready_dir": ready,
            }
            procs.append(
                subprocess.Popen(
                    child_command(spec),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=rank_env(threads, nproc_per_node=nproc, cpu_only=device == "cpu"),
                )
            )
        outs = [p.communicate(timeout=timeout) for p in procs]
    ledger.record(
        child_command({}), time.monotonic() - t0, ledger.children_cpu_s() - cpu0, ranks=nproc, dtype=dtype
    )
    for p, (_out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"GEMM probe failed (exit {p.returncode}): {err.strip()[-2000:]}")
    children = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    return {
        "dtype": dtype,
        "tokens": tokens,
        "nproc": nproc,
        "threads": threads,
        "device": device,
        **ceiling_from_children(children, shapes, tokens),
        "children": children,
    }


def child_command(spec: dict) -> list[str]:
    """The command line of one GEMM rank: this package's `__main__` with the spec as one JSON argument."""
    return [sys.executable, "-m", "workshop.experiments.ceiling", "--child", json.dumps(spec)]
