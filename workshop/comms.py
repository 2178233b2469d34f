"""How many bytes ZeRO moves per step, over which wire, and what that costs: chapter 06's model and benchmark.

The model is deliberately small: step time = compute + (1 - overlap) x (collective bytes / link bandwidth
+ offload bytes / PCIe bandwidth). Bytes come from the ZeRO algorithm (ring factor (N-1)/N, gradient
accumulation, one all-gather per forward, backward and checkpoint recompute); bandwidths come from
workshop.topology (published line rates x one stated efficiency). The only number taken from a
measurement is each instance's compute time, read off its own single-pod run; every multi-pod time is
then a prediction. Locally the same model is calibrated with a torch.distributed collective benchmark.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_positive, report
from workshop.topology import GB, INSTANCES, SEED_RUNS, SEED_STEPS, SeedRun, SeedWorkload, instance, link

OPS = ("all_reduce", "all_gather", "reduce_scatter")
SIZES_MB = (0.004, 0.064, 0.25, 1, 4, 16, 64)  # <= 0.1 MB pin the per-call latency, >= 1 MB the bandwidth
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "comms.json"
NETSIM_RESULTS = ROOT / "benchmarks" / "results" / "netsim.json"


# ---------------------------------------------------------------- traffic model

def ring_factor(world: int) -> float:
    """A ring moves (N-1)/N of the buffer through every rank's link."""
    check_positive("world size", world)
    return (world - 1) / world


def gathers_per_micro_step(grad_ckpt: bool) -> int:
    """ZeRO-3 all-gathers every parameter for forward and for backward; checkpoint recompute adds one more."""
    return 3 if grad_ckpt else 2


@dataclass(frozen=True)
class Traffic:
    """Bytes each rank sends (= receives) per optimizer step, by collective, plus the PCIe offload copies."""

    stage: int
    world: int
    params: int
    grad_accum: int
    bytes_per_param: int
    gathers_per_micro: int
    all_gather: float
    reduce_scatter: float
    all_reduce: float
    pcie_h2d: float
    pcie_d2h: float

    @property
    def collective(self) -> float:
        return self.all_gather + self.reduce_scatter + self.all_reduce

    @property
    def pcie(self) -> float:
        return max(self.pcie_h2d, self.pcie_d2h)  # PCIe is full duplex: the busier direction sets the time


def zero_traffic(params: int, world: int, stage: int, *, grad_accum: int = 1, bytes_per_param: int = 2,
                 grad_ckpt: bool = False, offload_param: bool = False, offload_optimizer: bool = False,
                 reduce_scatter_as_all_reduce: bool = False) -> Traffic:
    """Per-rank bytes per optimizer step for ZeRO stage 0-3 (0 = plain data parallel).

    stage 0: one all-reduce of the gradients per step (accumulation stays local).
    stage 1: gradients reduce-scattered once per step, updated parameters all-gathered once per step.
    stage 2: gradients are partitioned, so they are reduce-scattered every micro-step.
    stage 3: parameters are partitioned too: all-gathered for every forward, backward (and recompute).
    `reduce_scatter_as_all_reduce`: backends such as gloo implement reduce-scatter as an all-reduce
    (twice the bytes); the collective benchmark measures which one yours does.
    """
    check_choice("ZeRO stage", stage, (0, 1, 2, 3))
    check_positive("params", params)
    check_positive("grad_accum", grad_accum)
    check_positive("bytes_per_param", bytes_per_param)
    size = float(params) * bytes_per_param
    r = ring_factor(world)
    rs = 2 * r * size if reduce_scatter_as_all_reduce else r * size
    k = gathers_per_micro_step(grad_ckpt) if stage == 3 else 0
    ag = rsc = ar = 0.0
    if stage == 0:
        ar = 2 * r * size
    elif stage == 1:
        rsc, ag = rs, r * size
    elif stage == 2:
        rsc, ag = grad_accum * rs, r * size
    else:
        rsc, ag = grad_accum * rs, grad_accum * k * r * size
    shard = size / world
    h2d = d2h = 0.0
    if offload_optimizer:
        d2h = shard * (grad_accum if stage >= 2 else 1)  # gradient partitions go to the CPU optimizer
        h2d = shard  # updated parameters come back
    if stage == 3 and offload_param:
        h2d = grad_accum * k * shard  # every gather first fetches the local shard from host memory
    return Traffic(stage, world, params, grad_accum, bytes_per_param, k, ag, rsc, ar, h2d, d2h)


# ---------------------------------------------------------------- step time

@dataclass(frozen=True)
class StepPrediction:
    compute_s: float
    collective_s: float
    pcie_s: float
    overlap: float
    total_s: float

    @property
    def exposed_s(self) -> float:
        return self.total_s - self.compute_s


def step_time(traffic: Traffic, *, collective_gbytes_per_s: float, compute_s: float, overlap: float = 0.0,
              pcie_gbytes_per_s: float | None = None) -> StepPrediction:
    """compute + (1 - overlap) x communication; `overlap` is the stated fraction hidden behind compute."""
    check_positive("collective bandwidth", collective_gbytes_per_s)
    check_positive("compute time", compute_s, allow_zero=True)
    if not 0.0 <= overlap < 1.0:
        raise WorkshopError(f"overlap must be in [0, 1), got {overlap!r}")
    coll = traffic.collective / (collective_gbytes_per_s * GB)
    pcie = traffic.pcie / (pcie_gbytes_per_s * GB) if pcie_gbytes_per_s else 0.0
    return StepPrediction(compute_s, coll, pcie, overlap, compute_s + (1 - overlap) * (coll + pcie))


def seed_traffic(w: SeedWorkload | None = None) -> Traffic:
    w = w or SeedWorkload()
    return zero_traffic(w.params, w.world, w.zero_stage, grad_accum=w.grad_accum,
                        bytes_per_param=w.bytes_per_param, grad_ckpt=w.grad_ckpt,
                        offload_param=w.offload_param, offload_optimizer=w.offload_optimizer)


def collective_bandwidth(instance_name: str, pods: int, network: str | None, *, efa_per_pod: int = 1) -> float:
    """Effective GB/s of the slowest edge of the ring: NVLink/PCIe inside one pod, the pod's NIC(s) across pods."""
    inst = instance(instance_name)
    intra = link(inst.intra_link).effective_gbytes_per_s
    if pods == 1:
        return intra
    check_choice("network between pods", network, ("efa", "eni"))
    per_pod = link(network).effective_gbytes_per_s * (efa_per_pod if network == "efa" else 1)
    return min(intra, per_pod)


@dataclass(frozen=True)
class SeedRow:
    label: str
    instance: str
    pods: int
    network: str | None
    transport: str
    measured_s: float  # per optimizer step
    predicted_s: float
    compute_s: float
    collective_s: float
    pcie_s: float
    fitted: bool  # True for the single-pod run the compute time was read from
    retest: bool

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1


def _predict(run: SeedRun, network: str | None, compute_s: float, overlap: float, efa_per_pod: int,
             traffic: Traffic) -> StepPrediction:
    inst = instance(run.instance)
    bw = collective_bandwidth(run.instance, run.pods, network, efa_per_pod=efa_per_pod)
    return step_time(traffic, collective_gbytes_per_s=bw, compute_s=compute_s, overlap=overlap,
                     pcie_gbytes_per_s=link(inst.pcie).effective_gbytes_per_s)


def seed_comparison(*, overlap: float = 0.0, efa_per_pod: int = 1,
                    workload: SeedWorkload | None = None) -> list[SeedRow]:
    """Predict every seed run. Per instance, compute time = its single-pod step minus the modelled comms.

    A multi-pod run whose transport the seed did not record is predicted twice (EFA and ENI).
    """
    traffic = seed_traffic(workload)
    rows: list[SeedRow] = []
    for name in INSTANCES:
        runs = [r for r in SEED_RUNS if r.instance == name]
        single = next(r for r in runs if r.pods == 1)
        measured1 = single.seconds / SEED_STEPS
        comm1 = _predict(single, None, 0.0, overlap, efa_per_pod, traffic)
        compute = measured1 - comm1.total_s
        if compute <= 0:
            raise WorkshopError(f"{name}: modelled comms ({comm1.total_s:.1f} s) exceed the measured step")
        for run in runs:
            networks = ["efa", "eni"] if run.network == "unrecorded" else [run.network]
            for net in networks:
                p = _predict(run, net, compute, overlap, efa_per_pod, traffic)
                label = run.label if run.network != "unrecorded" else run.label.replace("?", f"{net.upper()}?")
                rows.append(SeedRow(label, name, run.pods, net, run.transport, run.seconds / SEED_STEPS,
                                    p.total_s, compute, p.collective_s, p.pcie_s, run.pods == 1, run.retest))
    return rows


def seed_checks(rows: list[SeedRow]) -> dict:
    """The chapter's claims, computed: per-instance ordering and the p4d EFA/single-pod ratio."""
    ordering = {}
    for name in INSTANCES:
        mine = [r for r in rows if r.instance == name]
        recorded = [r for r in mine if "?" not in r.label]
        single = next(r for r in mine if r.pods == 1)
        ok = all(r.predicted_s > single.predicted_s for r in mine if r.pods > 1)
        measured_order = [r.label for r in sorted(recorded, key=lambda r: r.measured_s)]
        predicted_order = [r.label for r in sorted(recorded, key=lambda r: r.predicted_s)]
        ordering[name] = {"single_pod_fastest": ok, "recorded_order_matches": measured_order == predicted_order,
                          "measured_order": measured_order}
    # across instances (rows whose transport was recorded): which neighbouring pairs swap places
    recorded = sorted((r for r in rows if "?" not in r.label), key=lambda r: r.measured_s)
    swaps = [(a.label, b.label) for i, a in enumerate(recorded) for b in recorded[i + 1:]
             if a.predicted_s > b.predicted_s]
    p4d = {r.network: r for r in rows if r.instance == "p4d.24xlarge"}
    measured_ratio = p4d["efa"].measured_s / p4d[None].measured_s
    predicted_ratio = p4d["efa"].predicted_s / p4d[None].predicted_s
    return {
        "ordering": ordering,
        "ordering_ok": all(v["single_pod_fastest"] and v["recorded_order_matches"] for v in ordering.values()),
        "global_order_swaps": swaps,
        "p4d_ratio_measured": measured_ratio,
        "p4d_ratio_predicted": predicted_ratio,
        "p4d_ratio_error": predicted_ratio / measured_ratio - 1,
        "p4d_eni_error": p4d["eni"].error,
    }


def overlap_sweep(overlaps=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5)) -> list[dict]:
    """How the p4d ratio depends on the one stated parameter the data cannot pin down."""
    out = []
    for ov in overlaps:
        c = seed_checks(seed_comparison(overlap=ov))
        out.append({"overlap": ov, "p4d_ratio_predicted": c["p4d_ratio_predicted"],
                    "p4d_ratio_error": c["p4d_ratio_error"]})
    return out


def bandwidth_sweep(gbytes_per_s: list[float], *, compute_s: float, traffic: Traffic | None = None,
                    pcie_gbytes_per_s: float | None = None, overlap: float = 0.0) -> list[dict]:
    """Step time as the inter-rank bandwidth varies: where a run stops being compute-bound."""
    traffic = traffic or seed_traffic()
    return [{"gbytes_per_s": b, "step_s": step_time(traffic, collective_gbytes_per_s=b, compute_s=compute_s,
                                                    overlap=overlap, pcie_gbytes_per_s=pcie_gbytes_per_s).total_s}
            for b in gbytes_per_s]


# ---------------------------------------------------------------- collective benchmark

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


def _worker(argv: list[str]) -> int:
    """One rank of the collective benchmark (run under torchrun); rank 0 writes the JSON."""
    import torch
    import torch.distributed as dist

    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", type=float, nargs="+", required=True)
    p.add_argument("--ops", nargs="+", default=list(OPS))
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--gap-ms", type=float, default=0.0, help="idle time before each timed call, as compute leaves")
    p.add_argument("--out", help="JSON written by rank 0 (default: <output-dir>/collectives.json)")
    # what a node launcher such as workshop.netsim appends for the training entry point
    p.add_argument("--output-dir")
    p.add_argument("--threads", type=int)
    a = p.parse_args(argv)
    if not (a.out or a.output_dir):
        p.error("give --out or --output-dir")
    out = Path(a.out or Path(a.output_dir) / "collectives.json")
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if a.backend == "nccl" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rows = []
    for op in a.ops:
        for mb in a.sizes_mb:
            n = max(world, int(mb * 1e6 / 4) // world * world)  # fp32 elements, divisible by world
            full = torch.ones(n, device=dev)
            shard = torch.ones(n // world, device=dev)

            def once(op=op, full=full, shard=shard):
                if op == "all_reduce":
                    dist.all_reduce(full)
                elif op == "all_gather":
                    dist.all_gather_into_tensor(full, shard)
                else:
                    dist.reduce_scatter_tensor(shard, full)
            once()
            sync()
            dist.barrier()
            lo0, dt = loopback_bytes(), 0.0
            for _ in range(a.iters):
                if a.gap_ms:
                    time.sleep(a.gap_ms / 1e3)  # idle link: TCP restarts from a small window (slow start)
                    dist.barrier()
                t0 = time.perf_counter()
                once()
                sync()
                dt += time.perf_counter() - t0
            dt /= a.iters
            lo1 = loopback_bytes()
            size = n * 4
            rows.append({"op": op, "bytes": size, "time_s": dt, "algbw_gbytes_per_s": size / dt / GB,
                         "busbw_gbytes_per_s": size / dt / GB * bus_factor(op, world),
                         "loopback_bytes_per_rank": (lo1 - lo0) / a.iters / world})
            dist.barrier()
    if rank == 0:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"backend": a.backend, "world": world, "results": rows}, indent=2))
    dist.destroy_process_group()
    return 0


def _torchrun(module_args: list[str], *, nproc: int, env: dict | None = None, prefix: list[str] | None = None,
              timeout: float = 900, log_path: Path | None = None) -> subprocess.CompletedProcess:
    """A collective-benchmark torchrun, built and set up like every other run (workshop.launch)."""
    from workshop.launch import rank_env, torchrun_command

    if module_args[:2] != ["-m", "workshop.comms"]:
        raise ValueError(f"expected ['-m', 'workshop.comms', ...], got {module_args[:2]}")
    port = 29500 + (os.getpid() * 7 + int(time.time())) % 2000
    cmd = torchrun_command(module_args[2:], module="workshop.comms", nproc_per_node=nproc, prefix=prefix,
                           master_addr="127.0.0.1", master_port=port)
    backend = module_args[module_args.index("--backend") + 1] if "--backend" in module_args else "gloo"
    full_env = rank_env(None, {"GLOO_SOCKET_IFNAME": "lo", **(env or {})}, nproc_per_node=nproc,
                        cpu_only=backend != "nccl")
    proc = subprocess.run(cmd, check=False, env=full_env, capture_output=True, text=True, timeout=timeout)
    if log_path:
        Path(log_path).write_text(proc.stdout + proc.stderr)
    return proc


def run_collective_bench(*, backend: str = "gloo", sizes_mb=SIZES_MB, ops=OPS, nproc: int = 2,
                         iters: int = 5, env: dict | None = None, prefix: list[str] | None = None) -> dict:
    """All-reduce / all-gather / reduce-scatter over message sizes: gloo on CPU, nccl on GPUs."""
    check_choice("backend", backend, ("gloo", "nccl"))
    check_positive("nproc", nproc)
    for op in ops:
        check_choice("collective", op, OPS)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        args = ["-m", "workshop.comms", "_worker", "--backend", backend, "--iters", str(iters), "--out", str(out),
                "--sizes-mb", *map(str, sizes_mb), "--ops", *ops]
        proc = _torchrun(args, nproc=nproc, env={"OMP_NUM_THREADS": "1", **(env or {})}, prefix=prefix)
        if proc.returncode != 0 or not out.exists():
            raise WorkshopError(f"collective benchmark failed (rc={proc.returncode}):\n{proc.stderr[-2000:]}")
        result = json.loads(out.read_text())
    result["fit"] = fit_collectives(result["results"], result["world"])
    return result


SMALL_BYTES, LARGE_BYTES = 100_000, 1_000_000


def _two_regime_fit(sizes: list[float], xs: list[float], ys: list[float]) -> tuple[float, float]:
    """t = a + b x from the two regimes a collective has: a = the median time of small messages (<= 100 kB,
    latency-bound), b = the least-squares slope over large ones (>= 1 MB, bandwidth-bound). Falls back to one
    least-squares line over all points when a regime has no data."""
    small = [y for s, y in zip(sizes, ys) if s <= SMALL_BYTES]
    big = [(x, y) for s, x, y in zip(sizes, xs, ys) if s >= LARGE_BYTES]
    if len(big) < 2:
        big = list(zip(xs, ys))
    mx, my = statistics.fmean(x for x, _ in big), statistics.fmean(y for _, y in big)
    sxx = sum((x - mx) ** 2 for x, _ in big)
    b = sum((x - mx) * (y - my) for x, y in big) / sxx if sxx else 0.0
    a = statistics.median(small) if small else max(0.0, my - b * mx)
    return a, b


def netsim_collective_bench(rates=("10gbit", "1gbit"), *, sizes_mb=SIZES_MB, iters: int = 3, gap_ms: float = 0.0,
                            out_dir: Path | None = None) -> dict:
    """The same benchmark with each rank in its own network namespace behind a tc rate cap (chapter 05's
    workshop.netsim): what the link really delivers to gloo at each cap. Falls back to loopback (no caps)
    where namespaces cannot be created, and says so in "mode"/"reason"."""
    from workshop import netsim

    tmp = Path(out_dir or tempfile.mkdtemp(prefix="comms-netsim-"))
    cfg = netsim.NetSimConfig(nodes=2, rates=list(rates), module="workshop.comms", out_dir=tmp, timeout_s=600,
                              train_args=["_worker", "--iters", str(iters), "--gap-ms", str(gap_ms),
                                          "--sizes-mb", *map(str, sizes_mb)])
    report = netsim.run(cfg, progress=lambda *_: None)
    out = {"mode": report.mode, "reason": report.reason, "gap_ms": gap_ms, "rates": {}}
    for res in report.results:
        f = Path(res.nodes[0].log_path).parent / "output" / "collectives.json"
        if not f.exists():
            raise WorkshopError(f"collective benchmark at {res.rate} failed: see {res.nodes[0].log_path}")
        bench = json.loads(f.read_text())
        bench["fit"] = fit_collectives(bench["results"], bench["world"])
        bench["tx_bytes_per_node"] = [n.tx_bytes for n in res.nodes]
        out["rates"][res.rate] = bench
    return out


def fit_collectives(rows: list[dict], world: int) -> dict:
    """Fit t = alpha + per-rank bytes / B for each collective: latency and effective bandwidth.

    Per-rank bytes are what the traffic model counts ((N-1)/N of the buffer, twice for all-reduce), so
    B is directly the bandwidth zero_traffic() divides by. The loopback counter says how many bytes the
    backend really moved, which exposes e.g. a reduce-scatter implemented as an all-reduce.
    """
    fit = {}
    for op in OPS:
        pts = [(r["bytes"] * bus_factor(op, world), r["time_s"], r.get("loopback_bytes_per_rank", 0.0), r["bytes"])
               for r in rows if r["op"] == op]
        if len(pts) < 2:
            continue
        alpha, slope = _two_regime_fit([p[3] for p in pts], [p[0] for p in pts], [p[1] for p in pts])
        big = max(pts)
        wire = big[2] / big[0] if big[0] and big[2] else None
        fit[op] = {"alpha_s": alpha, "gbytes_per_s": (1 / slope / GB) if slope > 0 else math.inf,
                   "wire_bytes_over_model_bytes": wire}
    return fit


def collective_time(traffic: Traffic, fit: dict, *, n_ops: dict | None = None) -> float:
    """Seconds per step for a traffic pattern on a calibrated backend (bytes / B + ops x latency)."""
    t = 0.0
    for op, nbytes in (("all_gather", traffic.all_gather), ("reduce_scatter", traffic.reduce_scatter),
                       ("all_reduce", traffic.all_reduce)):
        if nbytes:
            f = fit[op]
            t += nbytes / (f["gbytes_per_s"] * GB) + (n_ops or {}).get(op, 0) * f["alpha_s"]
    return t


# ---------------------------------------------------------------- DeepSpeed ZeRO-3, call by call

@dataclass(frozen=True)
class Zero3Settings:
    """The DeepSpeed ZeRO-3 knobs that decide how many collectives a step issues (DeepSpeed's defaults)."""

    param_persistence_threshold: float = 1e5  # params this small are never partitioned...
    prefetch_bucket_size: float = 5e7  # ...the rest are fetched in coalesced buckets of this many elements
    max_reuse_distance: float = 1e9  # a gathered param is kept if it is used again within this many elements
    max_live_parameters: float = 1e9
    reduce_bucket_size: float = 5e8


@dataclass(frozen=True)
class Zero3Calls:
    """Collective calls and full-buffer bytes per optimizer step, derived from the model's parameter shapes."""

    params: int
    partitioned: int  # elements of partitioned parameters
    persistent_params: int  # how many parameters stay whole on every rank
    persistent: int  # their elements
    gather_passes: int  # forward only (kept for backward), or forward + backward (+ recompute)
    all_gather_calls: int
    all_gather_bytes: float  # full gathered buffers
    reduce_scatter_calls: int
    reduce_scatter_bytes: float
    all_gather_waves: int  # groups of calls launched together and waited for together: one latency each

    def traffic(self, world: int, grad_accum: int = 1) -> Traffic:
        """The same step as per-rank wire bytes ((N-1)/N of every buffer), for collective_time()."""
        r = ring_factor(world)
        return Traffic(3, world, self.params, grad_accum, 2, self.gather_passes, r * self.all_gather_bytes,
                       r * self.reduce_scatter_bytes, 0.0, 0.0, 0.0)

    @property
    def n_ops(self) -> dict:
        """Latencies paid per step: one per wave of all-gathers, one per reduce-scatter bucket."""
        return {"all_gather": self.all_gather_waves, "reduce_scatter": self.reduce_scatter_calls}


def zero3_calls(model: str, *, grad_accum: int = 1, grad_ckpt: bool = False, bytes_per_param: int = 2,
                settings: Zero3Settings | None = None) -> Zero3Calls:
    """Count ZeRO-3's collectives from the architecture (meta device, no weights), the way DeepSpeed issues them.

    - A parameter with at most `param_persistence_threshold` elements stays whole on every rank; after each
      optimizer step DeepSpeed all-gathers the updated persistent parameters, ONE CALL PER PARAMETER, all
      launched asynchronously and then waited for: one wave, so one latency, however many calls.
    - The others are fetched with prefetching: one coalesced all-gather per `prefetch_bucket_size` elements.
    - A fetched parameter is released only if it is not used again within `max_reuse_distance` elements (and
      live parameters stay under `max_live_parameters`). A model smaller than both keeps its forward gather
      for the backward pass; a larger one (Llama-3-8B) gathers again for backward and for recompute.
    - Gradients are reduce-scattered in buckets of `reduce_bucket_size` elements, every micro-step.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from workshop.models import build_config

    st = settings or Zero3Settings()
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(build_config(model))
    sizes = [p.numel() for p in net.parameters()]
    persistent = [n for n in sizes if n <= st.param_persistence_threshold]
    total, part = sum(sizes), sum(sizes) - sum(persistent)
    keep = total <= min(st.max_reuse_distance, st.max_live_parameters)
    passes = 1 if keep else gathers_per_micro_step(grad_ckpt)
    fetch_calls = math.ceil(part / st.prefetch_bucket_size) if part else 0
    rs_calls = math.ceil(total / st.reduce_bucket_size)
    return Zero3Calls(
        params=total, partitioned=part, persistent_params=len(persistent), persistent=sum(persistent),
        gather_passes=passes,
        all_gather_calls=grad_accum * passes * fetch_calls + len(persistent),
        all_gather_bytes=float(bytes_per_param) * (grad_accum * passes * part + sum(persistent)),
        reduce_scatter_calls=grad_accum * rs_calls,
        reduce_scatter_bytes=float(bytes_per_param) * grad_accum * total,
        all_gather_waves=grad_accum * passes * fetch_calls + (1 if persistent else 0))


# ---------------------------------------------------------------- counting what ZeRO-3 really calls

_COUNTED = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
            "broadcast", "barrier", "all_gather_object", "broadcast_object_list")


def _nbytes(op: str, args, kwargs) -> int:
    """The full buffer a call moves, in the benchmark's convention (the gathered / reduced tensor)."""
    import torch

    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    lists = [a for a in (*args, *kwargs.values()) if isinstance(a, (list, tuple)) and a
             and isinstance(a[0], torch.Tensor)]
    if op in ("all_gather", "reduce_scatter") and lists:
        return sum(t.numel() * t.element_size() for t in lists[0])
    return max((t.numel() * t.element_size() for t in tensors), default=0)


def _count_worker(argv: list[str]) -> int:
    """Run the training entry point with torch.distributed's collectives wrapped by counters.

    Each optimizer step (DeepSpeed's _take_model_step) snapshots the counts, so the JSON holds calls and
    bytes per step by collective: the ground truth the architecture-derived call count is checked against.
    """
    import torch.distributed as dist
    from deepspeed.runtime.engine import DeepSpeedEngine

    out, train_argv = argv[0], argv[1:]
    live: dict[str, list[int]] = {}
    snaps: list[dict] = []
    trace: list[tuple] = []  # (optimizer steps done, collective, bytes) for every call

    def wrap(op, fn):
        def counted(*args, **kwargs):
            c = live.setdefault(op, [0, 0])
            n = _nbytes(op, args, kwargs)
            c[0] += 1
            c[1] += n
            trace.append((len(snaps), op, n))
            return fn(*args, **kwargs)
        return counted

    for op in _COUNTED:
        setattr(dist, op, wrap(op, getattr(dist, op)))
    take = DeepSpeedEngine._take_model_step
    step_s = [0.0]

    def snap_after(self, *a, **k):
        t0 = time.perf_counter()
        r = take(self, *a, **k)
        step_s[0] += time.perf_counter() - t0
        snaps.append({**{op: list(v) for op, v in live.items()}, "_step_s": [0, step_s[0]]})
        return r
    DeepSpeedEngine._take_model_step = snap_after
    from workshop import train

    rc = train.main(train_argv)
    if int(os.environ.get("RANK", "0")) == 0:
        Path(out).write_text(json.dumps({"snapshots": snaps, "trace": trace}))
    return rc


def per_step_calls(snapshots: list[dict], skip: int = 1) -> dict[str, dict]:
    """Calls and bytes between consecutive optimizer steps (skipping warm-up), median over steps.

    The pseudo-op "_step_s" carries the seconds spent in DeepSpeed's optimizer step (as its "bytes")."""
    diffs = []
    for a, b in zip(snapshots[skip:], snapshots[skip + 1:]):
        diffs.append({op: (v[0] - a.get(op, [0, 0])[0], v[1] - a.get(op, [0, 0])[1]) for op, v in b.items()})
    ops = sorted({op for d in diffs for op in d})
    return {op: {"calls": statistics.median(d.get(op, (0, 0))[0] for d in diffs),
                 "bytes": statistics.median(d.get(op, (0, 0))[1] for d in diffs)} for op in ops} if diffs else {}


# ---------------------------------------------------------------- local ZeRO-3 check

@dataclass
class LocalRun:
    model: str
    world: int
    offload: bool
    grad_ckpt: bool
    step_time_s: float
    optimizer_step_s: float  # time inside DeepSpeed's optimizer step (work that ZeRO splits N ways)
    calls: dict  # collective -> {"calls", "bytes"} per optimizer step, counted
    loopback_bytes_per_step_per_rank: float | None
    precision: str = "bf16"  # what the run trained in (precision "auto" decides per machine)

    @property
    def bytes_per_param(self) -> int:
        """ZeRO-3 gathers the 16-bit weights in bf16 and the fp32 weights in fp32: twice the bytes."""
        return 2 if self.precision == "bf16" else 4


def train_argv(model: str, *, offload: bool = False, grad_ckpt: bool = False, steps: int = 6,
               micro_batch: int = 4, seq_len: int = 128) -> list[str]:
    """The ZeRO-3 command this chapter measures (one thread per rank, so ranks do not fight for cores)."""
    args = ["--model", model, "--zero-stage", "3", "--max-steps", str(steps), "--micro-batch", str(micro_batch),
            "--seq-len", str(seq_len), "--threads", "1"]
    if offload:
        args += ["--offload-optimizer", "--offload-param"]
    if grad_ckpt:
        args += ["--grad-ckpt"]
    return args


def run_training(model: str, *, world: int, offload: bool = False, grad_ckpt: bool = False, steps: int = 6,
                 micro_batch: int = 4, seq_len: int = 128, out_dir: Path | None = None,
                 prefix: list[str] | None = None) -> LocalRun:
    """One ZeRO-3 run of the lead's entry point with counted collectives: median step time (after the
    first), time in the optimizer step, collective calls and bytes per step, loopback bytes."""
    out = Path(out_dir or tempfile.mkdtemp(prefix="comms-")) / f"{model}-w{world}-o{int(offload)}-c{int(grad_ckpt)}"
    out.mkdir(parents=True, exist_ok=True)
    calls_path = out / "calls.json"
    args = ["-m", "workshop.comms", "_count", str(calls_path),
            *train_argv(model, offload=offload, grad_ckpt=grad_ckpt, steps=steps, micro_batch=micro_batch,
                        seq_len=seq_len), "--output-dir", str(out)]
    lo0 = loopback_bytes()
    proc = _torchrun(args, nproc=world, prefix=prefix, env={"OMP_NUM_THREADS": "1"}, log_path=out / "log.txt")
    lo1 = loopback_bytes()
    metrics_path = out / "metrics.json"
    if proc.returncode != 0 or not metrics_path.exists() or not calls_path.exists():
        raise WorkshopError(f"training run failed (rc={proc.returncode}):\n{proc.stderr[-2000:]}")
    m = json.loads(metrics_path.read_text())
    times = [s["step_time_s"] for s in m["steps"][1:]] or [m["step_time_s_median"]]
    calls = per_step_calls(json.loads(calls_path.read_text())["snapshots"])
    opt = calls.pop("_step_s", {}).get("bytes", 0.0)
    lo = (lo1 - lo0) / steps / world if world > 1 and lo1 > lo0 else None
    return LocalRun(model, world, offload, grad_ckpt, statistics.median(times), opt, calls, lo,
                    precision=m.get("args", {}).get("precision", "bf16"))


def predict_from_single_rank(base: LocalRun, calls: Zero3Calls, fit: dict, world: int) -> dict:
    """N-rank ZeRO-3 step = the 1-rank step with the same micro-batch per rank, whose optimizer-step share
    shrinks to 1/N (each rank updates its partition only), + the collectives: counted calls x the fitted
    latency + per-rank bytes / the fitted bandwidth, per collective."""
    compute = base.step_time_s - base.optimizer_step_s + base.optimizer_step_s / world
    tr = calls.traffic(world)
    latency = sum(n * fit[op]["alpha_s"] for op, n in calls.n_ops.items())
    comm = collective_time(tr, fit, n_ops=calls.n_ops)
    every_call = fit["all_gather"]["alpha_s"] * (calls.all_gather_calls - calls.all_gather_waves)
    return {"compute_s": compute, "comm_s": comm, "latency_s": latency, "bandwidth_s": comm - latency,
            "predicted_s": compute + comm,
            # the alternative reading: every call pays a full latency, even those launched together
            "predicted_if_every_call_waits_s": compute + comm + every_call}


def local_comparison(fit: dict, *, models=("tiny", "small"), offloads=(False, True), steps: int = 10,
                     world: int = 2, out_dir: Path | None = None) -> list[dict]:
    """Measure 1-rank and N-rank ZeRO-3 runs and compare the N-rank step with the model's prediction."""
    rows = []
    for model in models:
        for off in offloads:
            base = run_training(model, world=1, offload=off, steps=steps, out_dir=out_dir)
            run = run_training(model, world=world, offload=off, steps=steps, out_dir=out_dir)
            calls = zero3_calls(model, bytes_per_param=run.bytes_per_param)
            pred = predict_from_single_rank(base, calls, fit, world)
            counted = run.calls
            rows.append({"model": model, "params": calls.params, "offload": off, "world": world,
                         "base_1rank_s": base.step_time_s, "optimizer_1rank_s": base.optimizer_step_s, **pred,
                         "measured_s": run.step_time_s, "error": pred["predicted_s"] / run.step_time_s - 1,
                         "all_gather_calls_model": calls.all_gather_calls,
                         "all_gather_calls_counted": counted.get("all_gather_into_tensor", {}).get("calls"),
                         "all_gather_bytes_model": calls.all_gather_bytes,
                         "all_gather_bytes_counted": counted.get("all_gather_into_tensor", {}).get("bytes"),
                         "reduce_scatter_calls_model": calls.reduce_scatter_calls,
                         "reduce_scatter_calls_counted": counted.get("reduce_scatter_tensor", {}).get("calls"),
                         "counted": counted})
    return rows


def netsim_check(bench: dict, netsim_result: dict, *, model: str = "tiny") -> dict:
    """Chapter 05's namespace runs: predict the step at each cap from the step at the fastest cap, swapping
    only the collective time (calls x latency + bytes / bandwidth, both fitted at each cap), and compare with
    the prediction from the cap's line rate alone."""
    from workshop.netsim import parse_rate

    rows = {r["rate"]: r for r in netsim_result.get("table", []) if r.get("ok") and r.get("step_time_s_median")}
    rates = [r for r in bench["rates"] if r in rows]
    if len(rates) < 2:
        raise WorkshopError(f"need step times at two caps; netsim has {sorted(rows)}, bench has {sorted(bench['rates'])}")
    rates.sort(key=lambda r: -(parse_rate(r) or math.inf))
    argv = netsim_result.get("train_args") or ["--precision", "bf16"]  # results from before "auto" were bf16
    asked = argv[argv.index("--precision") + 1] if "--precision" in argv else "auto"
    from workshop.hardware import resolve_precision  # the nodes ran on this machine: same resolution

    calls = zero3_calls(model, bytes_per_param=2 if resolve_precision(asked)[0] == "bf16" else 4)
    world = bench["rates"][rates[0]]["world"]
    tr = calls.traffic(world)
    ref = rates[0]
    comm = {r: collective_time(tr, bench["rates"][r]["fit"], n_ops=calls.n_ops) for r in rates}
    line = {r: (tr.all_gather + 2 * tr.reduce_scatter) / (parse_rate(r) / 8) for r in rates}
    out = []
    for r in rates:
        measured = rows[r]["step_time_s_median"]
        calibrated = rows[ref]["step_time_s_median"] - comm[ref] + comm[r]
        naive = rows[ref]["step_time_s_median"] - line[ref] + line[r]
        out.append({"rate": r, "measured_s": measured, "predicted_s": calibrated, "error": calibrated / measured - 1,
                    "line_rate_predicted_s": naive, "line_rate_error": naive / measured - 1,
                    "comm_s": comm[r], "reference": r == ref})
    return {"mode": bench.get("mode"), "model": model, "rows": out}


# ---------------------------------------------------------------- CLI

def model_report(overlap: float = 0.0, efa_per_pod: int = 1) -> dict:
    rows = seed_comparison(overlap=overlap, efa_per_pod=efa_per_pod)
    tr = seed_traffic()
    return {"workload": asdict(SeedWorkload()), "traffic_per_rank_per_step": asdict(tr),
            "overlap": overlap, "efa_per_pod": efa_per_pod,
            "rows": [{**asdict(r), "error": r.error} for r in rows], "checks": seed_checks(rows),
            "overlap_sweep": overlap_sweep()}


def _write(result: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {}
    from workshop.guard import versions

    path.write_text(json.dumps({**old, **result, "versions": versions()}, indent=2, default=str))
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workshop comms", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("model", help="predict the seed's GPU topologies and check the claims")
    m.add_argument("--overlap", type=float, default=0.0)
    m.add_argument("--efa-per-pod", type=int, default=1)
    b = sub.add_parser("bench", help="collective bus bandwidth over message sizes")
    b.add_argument("--backend", default="gloo", help="gloo (CPU) | nccl (GPU)")
    b.add_argument("--nproc", type=int, default=2)
    b.add_argument("--sizes-mb", type=float, nargs="+", default=list(SIZES_MB))
    b.add_argument("--iters", type=int, default=5)
    loc = sub.add_parser("local", help="bench + local ZeRO-3 step times vs the model")
    loc.add_argument("--models", nargs="+", default=["tiny", "small"])
    loc.add_argument("--steps", type=int, default=10)
    ns = sub.add_parser("netsim", help="bench inside chapter 05's rate-capped namespaces; check its step times")
    ns.add_argument("--rates", nargs="+", default=["10gbit", "1gbit"])
    ns.add_argument("--netsim-json", default=str(NETSIM_RESULTS), help="workshop netsim --json output")
    for s in (m, b, loc, ns):
        s.add_argument("--out", default=str(RESULTS), help="JSON file (merged)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        return _worker(argv[1:])
    if argv[:1] == ["_count"]:
        return _count_worker(argv[1:])
    a = _parser().parse_args(argv)
    try:
        if a.cmd == "model":
            res = {"model": model_report(a.overlap, a.efa_per_pod)}
            c = res["model"]["checks"]
            print(f"p4d ratio predicted {c['p4d_ratio_predicted']:.2f} vs measured {c['p4d_ratio_measured']:.2f} "
                  f"({c['p4d_ratio_error']:+.0%}); ordering ok: {c['ordering_ok']}")
        elif a.cmd == "bench":
            res = {"bench": run_collective_bench(backend=a.backend, nproc=a.nproc, sizes_mb=a.sizes_mb,
                                                 iters=a.iters)}
            for op, f in res["bench"]["fit"].items():
                print(f"{op:15s} {f['gbytes_per_s']:.2f} GB/s  latency {f['alpha_s'] * 1e3:.2f} ms")
        elif a.cmd == "netsim":
            if not Path(a.netsim_json).exists():
                raise WorkshopError(f"{a.netsim_json} not found: run `workshop netsim --json {a.netsim_json}` first")
            bench = netsim_collective_bench(a.rates)
            check = netsim_check(bench, json.loads(Path(a.netsim_json).read_text()))
            res = {"netsim": {"bench": bench, **check}}
            for r in check["rows"]:
                print(f"{r['rate']:8s} measured {r['measured_s']:.3f} s  model {r['predicted_s']:.3f} s "
                      f"({r['error']:+.0%}); line rate only {r['line_rate_predicted_s']:.3f} s")
        else:
            bench = run_collective_bench()
            rows = local_comparison(bench["fit"], models=a.models, steps=a.steps)
            res = {"bench": bench, "local": rows,
                   "local_max_abs_error": max(abs(r["error"]) for r in rows)}
            for r in rows:
                print(f"{r['model']:6s} offload={r['offload']!s:5s} predicted {r['predicted_s']:.3f} s "
                      f"measured {r['measured_s']:.3f} s ({r['error']:+.0%})")
        print(f"wrote {_write(res, Path(a.out))}")
    except WorkshopError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
