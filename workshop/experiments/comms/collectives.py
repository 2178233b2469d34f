"""The collective benchmark: all-reduce / all-gather / reduce-scatter over message sizes, one rank per
process under torchrun (or in chapter 05's rate-capped namespaces), fitted to latency + bytes / bandwidth.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TypedDict

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.launch import netsim
from workshop.launch.procs import run_captured
from workshop.launch.torchrun import rank_env, torchrun_command
from workshop.plan.topology import GB
from workshop.plan.traffic import Traffic, ring_factor
from workshop.report.plots import plot_collective_bench

OPS = ("all_reduce", "all_gather", "reduce_scatter")
SIZES_MB = (0.004, 0.064, 0.25, 1, 4, 16, 64)  # <= 0.1 MB pin the per-call latency, >= 1 MB the bandwidth


class BenchRow(TypedDict):
    """One (collective, message size) measurement; chapter 06 plots busbw over bytes."""

    op: str
    bytes: int  # message size (the full buffer)
    time_s: float  # per call, mean over iters
    algbw_gbytes_per_s: float
    busbw_gbytes_per_s: float  # nccl-tests' bus bandwidth (algbw x bus_factor)
    loopback_bytes_per_rank: float  # per call, what `lo` carried


class CollectiveFit(TypedDict):
    """t = alpha_s + per-rank bytes / gbytes_per_s, for one collective."""

    alpha_s: float  # latency per call
    gbytes_per_s: float  # effective per-rank bandwidth (inf: time did not grow with size)
    wire_bytes_over_model_bytes: float | None  # loopback bytes / modelled bytes at the largest size


class CollectiveBench(TypedDict):
    """`run_collective_bench()`'s record (comms.json "bench"); chapter 06 prints its fit."""

    backend: str
    world: int
    results: list[BenchRow]
    fit: dict[str, CollectiveFit]  # per collective (OPS) with at least two sizes


class RateBench(CollectiveBench):
    """The benchmark at one rate cap of chapter 05's namespaces."""

    tx_bytes_per_node: list[int | None]


class NetsimBench(TypedDict):
    """`netsim_collective_bench()`'s record: the benchmark at every rate cap."""

    mode: str
    reason: str
    gap_ms: float
    rates: dict[str, RateBench]


def bus_factor(op: str, world: int) -> float:
    """nccl-tests convention: bus bandwidth = algorithm bandwidth x this, comparable to the link's speed."""
    check_choice("collective", op, OPS)
    r = ring_factor(world)
    return 2 * r if op == "all_reduce" else r


def loopback_bytes() -> int:
    """Bytes received on `lo` so far (Linux); what gloo moves between ranks on one host."""
    try:
        for line in Path("/proc/net/dev").read_text().splitlines():
            if line.strip().startswith("lo:"):
                return int(line.split(":", 1)[1].split()[0])
    except OSError:
        pass
    return 0


def launcher_flags(rest: list[str]) -> dict[str, str]:
    """The `--name value` pairs a node launcher appends after a worker's spec (workshop.launch.netsim adds
    --threads and --output-dir, as it does for the training entry point)."""
    if len(rest) % 2 or not all(k.startswith("--") for k in rest[::2]):
        raise WorkshopError(f"expected --name value pairs after the worker's JSON spec, got {rest}")
    return {k[2:].replace("-", "_"): v for k, v in zip(rest[::2], rest[1::2])}


def _time_collective(op: str, mb: float, spec: dict, world: int, dev, sync) -> BenchRow:
    """One (collective, message size): warm-up, then `iters` timed calls after a barrier each time."""
    import torch
    import torch.distributed as dist

    n = max(world, int(mb * 1e6 / 4) // world * world)  # fp32 elements, divisible by world
    full = torch.ones(n, device=dev)
    shard = torch.ones(n // world, device=dev)

    def once():
        if op == "all_reduce":
            dist.all_reduce(full)
        elif op == "all_gather":
            dist.all_gather_into_tensor(full, shard)
        else:
            dist.reduce_scatter_tensor(shard, full)

    once()
    sync()
    dist.barrier()
    iters, gap_ms = spec.get("iters", 5), spec.get("gap_ms", 0.0)
    lo0, dt = loopback_bytes(), 0.0
    for _ in range(iters):
        if gap_ms:
            time.sleep(gap_ms / 1e3)  # idle link: TCP restarts from a small window (slow start)
            dist.barrier()
        t0 = time.perf_counter()
        once()
        sync()
        dt += time.perf_counter() - t0
    dt /= iters
    lo1 = loopback_bytes()
    size = n * 4
    return {
        "op": op,
        "bytes": size,
        "time_s": dt,
        "algbw_gbytes_per_s": size / dt / GB,
        "busbw_gbytes_per_s": size / dt / GB * bus_factor(op, world),
        "loopback_bytes_per_rank": (lo1 - lo0) / iters / world,
    }


def collective_worker(spec: dict, flags: dict[str, str]) -> int:
    """One rank of the collective benchmark (run under torchrun); rank 0 writes the JSON to spec["out"] or
    <--output-dir>/collectives.json. spec: sizes_mb, ops, iters, backend, gap_ms (idle time before each
    timed call, as compute leaves)."""
    import torch
    import torch.distributed as dist

    if not (spec.get("out") or flags.get("output_dir")):
        raise WorkshopError('the collective worker needs an "out" in its spec or --output-dir')
    out = Path(spec.get("out") or Path(flags["output_dir"]) / "collectives.json")
    backend = spec.get("backend", "gloo")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if backend == "nccl"
        else torch.device("cpu")
    )
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rows: list[BenchRow] = []
    for op in spec.get("ops", OPS):
        for mb in spec["sizes_mb"]:
            rows.append(_time_collective(op, mb, spec, world, dev, sync))
            dist.barrier()
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"backend": backend, "world": world, "results": rows}, indent=2))
    dist.destroy_process_group()
    return 0


def _torchrun(
    module_args: list[str],
    *,
    nproc: int,
    env: dict | None = None,
    prefix: list[str] | None = None,
    timeout: float = 900,
    log_path: Path | None = None,
    backend: str = "gloo",
) -> subprocess.CompletedProcess:
    """A collective-benchmark torchrun, built and set up like every other run (workshop.launch.torchrun)."""

    if module_args[:2] != ["-m", "workshop.experiments.comms"]:
        raise ValueError(f"expected ['-m', 'workshop.experiments.comms', ...], got {module_args[:2]}")
    port = 29500 + (os.getpid() * 7 + int(time.time())) % 2000
    cmd = torchrun_command(
        module_args[2:],
        module="workshop.experiments.comms",
        nproc_per_node=nproc,
        prefix=prefix,
        master_addr="127.0.0.1",
        master_port=port,
    )
    full_env = rank_env(
        None, {"GLOO_SOCKET_IFNAME": "lo", **(env or {})}, nproc_per_node=nproc, cpu_only=backend != "nccl"
    )
    proc = run_captured(cmd, env=full_env, timeout=timeout)
    if log_path:
        Path(log_path).write_text(proc.stdout + proc.stderr)
    return proc


def run_collective_bench(
    *,
    backend: str = "gloo",
    sizes_mb=SIZES_MB,
    ops=OPS,
    nproc: int = 2,
    iters: int = 5,
    env: dict | None = None,
    prefix: list[str] | None = None,
) -> CollectiveBench:
    """All-reduce / all-gather / reduce-scatter over message sizes: gloo on CPU, nccl on GPUs. Returns the
    rows (bytes, seconds per call, GB/s) and per collective the fit: latency alpha_s (s) and GB/s."""
    check_choice("backend", backend, ("gloo", "nccl"))
    check_positive("nproc", nproc)
    check_positive("iters", iters)
    if not sizes_mb:
        raise WorkshopError("give at least one message size (--sizes-mb)")
    for size in sizes_mb:
        check_positive("--sizes-mb value", size)
    for op in ops:
        check_choice("collective", op, OPS)
    if backend == "nccl":  # else every rank fails inside torchrun
        import torch

        if not torch.cuda.is_available():
            raise WorkshopError("backend 'nccl' needs CUDA GPUs and none is visible; use --backend gloo")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        spec = {
            "backend": backend,
            "iters": iters,
            "out": str(out),
            "sizes_mb": list(sizes_mb),
            "ops": list(ops),
        }
        args = ["-m", "workshop.experiments.comms", "_worker", json.dumps(spec)]
        proc = _torchrun(
            args, nproc=nproc, env={"OMP_NUM_THREADS": "1", **(env or {})}, prefix=prefix, backend=backend
        )
        if proc.returncode != 0 or not out.exists():
            raise WorkshopError(f"collective benchmark failed (rc={proc.returncode}):\n{proc.stderr[-2000:]}")
        result: CollectiveBench = json.loads(out.read_text())  # _worker's JSON, without "fit"
    result["fit"] = fit_collectives(result["results"], result["world"])
    return result


SMALL_BYTES, LARGE_BYTES = 100_000, 1_000_000


def _two_regime_fit(sizes: list[float], xs: list[float], ys: list[float]) -> tuple[float, float]:
    """t = a + b x from the two regimes a collective has: a = the median time of small messages (<= 100 kB,
    latency-bound), b = the median over large ones (>= 1 MB, bandwidth-bound) of each point's own slope
    (t - a) / x. A median, not a least-squares line: on a busy machine one slow large message tilts a line
    until its bandwidth is several times what any point measured; the median keeps the fitted curve
    through the middle of the points it was fitted to (chapter 06 draws both). Falls back to one
    least-squares line over all points when a regime has no data."""
    small = [y for s, y in zip(sizes, ys) if s <= SMALL_BYTES]
    big = [(x, y) for s, x, y in zip(sizes, xs, ys) if s >= LARGE_BYTES]
    if len(big) < 2:
        big = list(zip(xs, ys))
    mx, my = statistics.fmean(x for x, _ in big), statistics.fmean(y for _, y in big)
    sxx = sum((x - mx) ** 2 for x, _ in big)
    b = sum((x - mx) * (y - my) for x, y in big) / sxx if sxx else 0.0
    a = statistics.median(small) if small else max(0.0, my - b * mx)
    per_point = [(y - a) / x for x, y in big if x > 0 and y > a]
    if small and per_point:
        b = statistics.median(per_point)
    return a, b


def netsim_collective_bench(
    rates=("10gbit", "1gbit"),
    *,
    sizes_mb=SIZES_MB,
    iters: int = 3,
    gap_ms: float = 0.0,
    out_dir: Path | None = None,
) -> NetsimBench:
    """The same benchmark with each rank in its own network namespace behind a tc rate cap (chapter 05's
    workshop.launch.netsim): what the link really delivers to gloo at each cap. Falls back to loopback (no
    caps) where namespaces cannot be created, and says so in "mode"/"reason". Returns per rate the rows and
    fit of `run_collective_bench` (s, GB/s) and the bytes each node sent."""

    tmp = Path(out_dir or tempfile.mkdtemp(prefix="comms-netsim-"))
    cfg = netsim.NetSimConfig(
        nodes=2,
        rates=list(rates),
        module="workshop.experiments.comms",
        out_dir=tmp,
        timeout_s=600,
        train_args=["_worker", json.dumps({"iters": iters, "gap_ms": gap_ms, "sizes_mb": list(sizes_mb)})],
    )
    report = netsim.run(cfg, progress=lambda *_: None)
    rates_out: dict[str, RateBench] = {}
    out: NetsimBench = {"mode": report.mode, "reason": report.reason, "gap_ms": gap_ms, "rates": rates_out}
    for res in report.results:
        f = Path(res.nodes[0].log_path).parent / "output" / "collectives.json"
        if not f.exists():
            raise WorkshopError(f"collective benchmark at {res.rate} failed: see {res.nodes[0].log_path}")
        bench: RateBench = json.loads(f.read_text())  # _worker's JSON; fit and bytes sent added here
        bench["fit"] = fit_collectives(bench["results"], bench["world"])
        bench["tx_bytes_per_node"] = [n.tx_bytes for n in res.nodes]
        rates_out[res.rate] = bench
    return out


def fit_collectives(rows: list[BenchRow], world: int) -> dict[str, CollectiveFit]:
    """Fit t = alpha + per-rank bytes / B for each collective: latency and effective bandwidth.

    Per-rank bytes are what the traffic model counts ((N-1)/N of the buffer, twice for all-reduce), so
    B is directly the bandwidth zero_traffic() divides by. The loopback counter says how many bytes the
    backend really moved, which exposes e.g. a reduce-scatter implemented as an all-reduce.
    """
    fit: dict[str, CollectiveFit] = {}
    for op in OPS:
        pts = [
            (
                r["bytes"] * bus_factor(op, world),
                r["time_s"],
                r.get("loopback_bytes_per_rank", 0.0),
                r["bytes"],
            )
            for r in rows
            if r["op"] == op
        ]
        if len(pts) < 2:
            continue
        alpha, slope = _two_regime_fit([p[3] for p in pts], [p[0] for p in pts], [p[1] for p in pts])
        big = max(pts)
        wire = big[2] / big[0] if big[0] and big[2] else None
        fit[op] = {
            "alpha_s": alpha,
            "gbytes_per_s": (1 / slope / GB) if slope > 0 else math.inf,
            "wire_bytes_over_model_bytes": wire,
        }
    return fit


def bench_figure(bench: CollectiveBench, path, *, machine: str = "") -> Path:
    """Chapter 06's collective figure: the measured bus bandwidth and the fit drawn at the same sizes, so the
    fitted bandwidth the model uses can be checked against the points it came from (GB/s over message
    bytes). Returns the PNG's path."""
    world = bench["world"]
    fits: dict[str, list[tuple[float, float]]] = {}
    labels: dict[str, str] = {}
    for op, f in bench.get("fit", {}).items():
        sizes = sorted({r["bytes"] for r in bench["results"] if r["op"] == op})
        x = [s * bus_factor(op, world) for s in sizes]
        fits[op] = [(s, xi / (f["alpha_s"] + xi / (f["gbytes_per_s"] * GB)) / GB) for s, xi in zip(sizes, x)]
        labels[op] = f"{op} fit: {f['gbytes_per_s']:.2f} GB/s, {f['alpha_s'] * 1e3:.2f} ms/call"
    title = f"{bench['backend']}, {world} ranks" + (f", {machine}" if machine else "")
    return plot_collective_bench(bench["results"], path, fits=fits, fit_labels=labels, title=title)


def collective_time(
    traffic: Traffic, fit: dict[str, CollectiveFit], *, n_ops: dict[str, int] | None = None
) -> float:
    """Seconds per step for a traffic pattern on a calibrated backend (bytes / B + ops x latency)."""
    t = 0.0
    for op, nbytes in (
        ("all_gather", traffic.all_gather),
        ("reduce_scatter", traffic.reduce_scatter),
        ("all_reduce", traffic.all_reduce),
    ):
        if nbytes:
            f = fit[op]
            t += nbytes / (f["gbytes_per_s"] * GB) + (n_ops or {}).get(op, 0) * f["alpha_s"]
    return t
