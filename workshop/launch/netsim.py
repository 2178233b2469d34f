"""Multi-node training without a cluster: each "node" is a Linux network namespace on this machine.

Why: a TrainJob on EKS runs `torchrun` once per node, with rendezvous over the pod network. The same
command can run here, once per network namespace, so the ranks really talk over a (virtual) wire:

    [ns wsn-n0: eth0 10.77.0.1] --veth-- [ns wsn-sw: bridge] --veth-- [ns wsn-n1: eth0 10.77.0.2]

The switch lives in its own namespace, so the host's network is never touched. A `tc tbf` qdisc on
each node's eth0 caps what that node can send (e.g. 10gbit ~ EFA-class vs 1gbit ~ a small ENI), and the
interface counters give the bytes each node put on the wire. Namespaces are always deleted, also on
failure or Ctrl-C, and stale ones with our prefix are removed before each run.

Without root (or without iproute2) it falls back to two node groups on loopback and says so: same
torchrun command and rendezvous, but no rate caps and no per-node byte counts.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_output, check_positive
from workshop.lang import _
from workshop.launch.netns import Topology, netns_available
from workshop.launch.procs import stop_tree
from workshop.launch.torchrun import build_ops, rank_env, torchrun_command
from workshop.plan.hardware import resolve_precision
from workshop.plan.memory import architecture
from workshop.plan.models import PRESETS
from workshop.plan.topology import parse_rate
from workshop.train import TrainArgs, parse_args
from workshop.train.data import local_kit
from workshop.train.guard import versions
from workshop.train.logs import METRIC_PREFIX, parse_metrics


def default_train_args() -> TrainArgs:
    """The run `workshop netsim` trains when no flags follow `--`: the tiny preset, 8 ZeRO-3 steps on gloo."""
    return TrainArgs(model="tiny", seq_len=128, micro_batch=4, max_steps=8, zero_stage=3, backend="gloo")


MODES = ("auto", "netns", "loopback")


@dataclass
class NetSimConfig:
    """One experiment: the same training command on `nodes` namespaces, once per rate cap (`rates`, tc's
    spelling: "10gbit", "1gbit", "none"); `timeout_s`: seconds per cap before the nodes are stopped."""

    nodes: int = 2
    procs_per_node: int = 1
    threads_per_rank: int = 1
    rates: list[str] = field(default_factory=lambda: ["10gbit", "1gbit"])
    train_args: TrainArgs | list[str] = field(default_factory=default_train_args)  # argv accepted too
    out_dir: Path = Path("out/netsim")
    mode: str = "auto"
    subnet: str = "10.77.0.0/24"
    prefix: str = "wsn"
    port: int = 29500
    timeout_s: float = 600.0
    module: str = "workshop.train"

    def __post_init__(self) -> None:
        for what in ("nodes", "procs_per_node", "threads_per_rank", "port", "timeout_s"):
            check_positive(what, getattr(self, what))
        check_choice("netsim mode", self.mode, MODES)
        if not self.rates:
            raise WorkshopError("give at least one rate (e.g. 10gbit), or 'none' for no cap")
        for rate in self.rates:
            parse_rate(rate)
        try:
            net = ipaddress.ip_network(self.subnet)
        except ValueError as exc:
            raise WorkshopError(f"bad subnet {self.subnet!r}: {exc}") from None
        if not net.is_private:
            raise WorkshopError(f"subnet {self.subnet} is not private; use e.g. 10.77.0.0/24")
        if net.num_addresses - 2 < self.nodes:
            raise WorkshopError(f"subnet {self.subnet} has no room for {self.nodes} nodes")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,5}", self.prefix):
            raise WorkshopError(
                f"bad prefix {self.prefix!r}: 1-6 lowercase letters/digits (interface names are short)"
            )
        self.out_dir = Path(self.out_dir)
        check_output(self.out_dir, "--out-dir", folder=True)
        if (
            self.module == "workshop.train"
        ):  # judged like the launcher does, before any namespace or rank exists
            if isinstance(self.train_args, TrainArgs):
                self.train_args.validate()
            else:
                parse_args(list(self.train_args))


# ---------------------------------------------------------------- one run per cap


@dataclass
class NodeResult:
    node: int
    address: str
    returncode: int | None
    log_path: str
    tx_bytes: int | None = None
    rx_bytes: int | None = None
    startup_tx_bytes: int | None = (
        None  # sent until the first step ended: rendezvous, initial weights, step 1
    )


@dataclass
class CapResult:
    rate: str
    rate_bps: int | None
    mode: str
    ok: bool
    wall_s: float
    nodes: list[NodeResult]
    steps: list[dict]
    first_loss: float | None = None
    final_loss: float | None = None
    step_time_s_median: float | None = None
    world_size: int | None = None
    note: str = ""


def node_command(
    cfg: NetSimConfig, node_rank: int, local_addr: str, rdzv_host: str, output_dir: Path, run_id: str
) -> list[str]:
    """What one simulated node runs, as a TrainJob's node container does: launch.torchrun_command with the
    rendezvous spelled out, the node's own address, and the module's arguments with this run's threads and
    output folder."""
    from dataclasses import replace

    if isinstance(cfg.train_args, TrainArgs):  # rendered to a command line only here, at the last moment
        argv = replace(cfg.train_args, threads=cfg.threads_per_rank, output_dir=str(output_dir)).to_argv()
    else:
        argv = [*cfg.train_args, "--threads", str(cfg.threads_per_rank), "--output-dir", str(output_dir)]
    # the first node hosts the c10d store (is_host): the hostname does not resolve inside a namespace
    return torchrun_command(
        argv,
        module=cfg.module,
        nproc_per_node=cfg.procs_per_node,
        nnodes=cfg.nodes,
        node_rank=node_rank,
        rdzv_endpoint=f"{rdzv_host}:{cfg.port}",
        rdzv_id=run_id,
        rdzv_conf=f"is_host={int(node_rank == 0)}",
        local_addr=local_addr,
    )


def _node_env(ifname: str, threads: int) -> dict[str, str]:
    """Every node's ranks get the launcher's one environment; gloo binds the namespace's interface, not
    whatever the hostname resolves to."""

    return rank_env(threads, {"GLOO_SOCKET_IFNAME": ifname}, cpu_only=True)


def _kill(procs: list[subprocess.Popen]) -> None:
    """Every node's launcher and its ranks (launch.stop_tree: the ranks run in sessions of their own)."""

    for p in procs:
        if p.poll() is None:
            stop_tree(p.pid, grace_s=10)
        p.wait()


def _summarise(steps: list[dict], skip: int = 1) -> dict:
    """Median step time skips the first step(s): they include warm-up (allocations, first collectives)."""
    times = [s["step_time_s"] for s in steps[skip:] if s.get("step_time_s") is not None] or [
        s["step_time_s"] for s in steps if s.get("step_time_s") is not None
    ]
    losses = [s["loss"] for s in steps if s.get("loss") is not None]
    return {
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "step_time_s_median": statistics.median(times) if times else None,
    }


@dataclass
class _Wire:
    """Where one cap's nodes live: their addresses, the rendezvous host, the interface gloo binds, and the
    namespaces (None on loopback)."""

    addresses: list[str]
    rdzv_host: str
    ifname: str
    topo: Topology | None = None

    @classmethod
    def of(cls, cfg: NetSimConfig, topo: Topology | None) -> _Wire:
        if topo is not None:
            return cls(topo.addresses, topo.addresses[0], "eth0", topo)
        return cls(["127.0.0.1"] * cfg.nodes, "127.0.0.1", "lo")

    def counters(self) -> list[dict] | None:
        return self.topo.counters() if self.topo is not None else None


def _start_nodes(
    cfg: NetSimConfig, wire: _Wire, run_dir: Path, run_id: str, procs: list[subprocess.Popen]
) -> list[Path]:
    """One torchrun per node (inside its namespace, or on loopback), appended to `procs` as it starts so the
    caller can stop every one that did; returns their log files."""
    logs = []
    for i in range(cfg.nodes):
        # one output dir for all nodes, like a shared volume (FSx/EFS) mounted into every pod
        cmd = node_command(cfg, i, wire.addresses[i], wire.rdzv_host, run_dir / "output", run_id)
        if wire.topo is not None:
            cmd = ["ip", "netns", "exec", wire.topo.namespaces[i], *cmd]
        logs.append(run_dir / f"node{i}.log")
        with open(logs[-1], "w") as fh:
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    cwd=str(run_dir),
                    env=_node_env(wire.ifname, cfg.threads_per_rank),
                    start_new_session=True,
                )
            )
    return logs


def _wait(
    cfg: NetSimConfig, wire: _Wire, procs: list[subprocess.Popen], first_log: Path, deadline: float
) -> tuple[str, list[dict] | None]:
    """Until every node exits, one fails, or the deadline passes: (why it stopped early or "", the wire's
    counters when the first step ended)."""
    at_first_step = None
    while any(p.poll() is None for p in procs):
        if (
            wire.topo is not None
            and at_first_step is None
            and METRIC_PREFIX in first_log.read_text(errors="replace")
        ):
            at_first_step = wire.counters()  # what start-up cost, apart from the steady steps after it
        if time.monotonic() > deadline:
            return f"timed out after {cfg.timeout_s:.0f} s", at_first_step
        if any(p.returncode not in (None, 0) for p in procs):
            return "a node failed; stopping the others", at_first_step
        time.sleep(0.5)
    return "", at_first_step


def _node_results(
    wire: _Wire, procs: list[subprocess.Popen], logs: list[Path], before, after, at_first_step
) -> list[NodeResult]:
    nodes = []
    for i, p in enumerate(procs):
        nr = NodeResult(node=i, address=wire.addresses[i], returncode=p.returncode, log_path=str(logs[i]))
        if before is not None and after is not None:
            nr.tx_bytes = after[i]["tx_bytes"] - before[i]["tx_bytes"]
            nr.rx_bytes = after[i]["rx_bytes"] - before[i]["rx_bytes"]
            if at_first_step is not None:
                nr.startup_tx_bytes = at_first_step[i]["tx_bytes"] - before[i]["tx_bytes"]
        nodes.append(nr)
    return nodes


def run_cap(cfg: NetSimConfig, rate: str, topo: Topology | None, progress=print) -> CapResult:
    """Launch one torchrun per node (inside its namespace, or on loopback), wait, collect logs and
    counters."""
    label = re.sub(r"[^a-z0-9]+", "-", rate.lower())
    run_dir = cfg.out_dir / label
    run_dir.mkdir(parents=True, exist_ok=True)
    if topo is not None:
        topo.set_rate(rate)
    wire = _Wire.of(cfg, topo)
    before = wire.counters()
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    note, at_first_step = "", None
    start = time.monotonic()
    try:
        logs = _start_nodes(cfg, wire, run_dir, f"netsim-{label}-{os.getpid()}", procs)
        note, at_first_step = _wait(cfg, wire, procs, logs[0], start + cfg.timeout_s)
    finally:
        _kill(procs)  # no-op for processes that already exited
    wall = time.monotonic() - start
    after = wire.counters()
    steps = parse_metrics("\n".join(p.read_text(errors="replace") for p in logs))
    mfile = run_dir / "output" / "metrics.json"
    world = json.loads(mfile.read_text()).get("world_size") if mfile.exists() else None
    ok = all(p.returncode == 0 for p in procs) and bool(steps)
    if not ok and not note:
        note = "no METRIC lines in the logs" if not steps else "a node exited with an error"
    result = CapResult(
        rate=rate,
        rate_bps=parse_rate(rate),
        mode="netns" if topo else "loopback",
        ok=ok,
        wall_s=round(wall, 2),
        nodes=_node_results(wire, procs, logs, before, after, at_first_step),
        steps=steps,
        world_size=world,
        note=note,
        **_summarise(steps),
    )
    median = result.step_time_s_median if result.step_time_s_median is not None else "-"
    said = (
        _("ok in {wall:.0f} s, median step {median} s")
        if ok
        else _("FAILED in {wall:.0f} s, median step {median} s")
    )
    progress(f"  {rate:>9}: " + said.format(wall=wall, median=median) + (f", {note}" if note else ""))
    return result


@dataclass
class NetSimReport:
    mode: str
    reason: str
    nodes: int
    procs_per_node: int
    train_args: list[str]
    results: list[CapResult]
    weights_mb: float | None = None  # the model's weights (MB, the run's precision): rank 0 broadcasts them

    def table(self) -> list[dict]:
        """One row per cap: what the notebook shows and the JSON benchmark records."""

        def mb(b):
            return None if b is None else round(b / 1e6, 1)

        rows = []
        for r in self.results:
            steady = [
                None
                if n.tx_bytes is None or n.startup_tx_bytes is None or len(r.steps) < 2
                else (n.tx_bytes - n.startup_tx_bytes) / (len(r.steps) - 1)
                for n in r.nodes
            ]
            rows.append(
                {
                    "rate": r.rate,
                    "mode": r.mode,
                    "ok": r.ok,
                    "step_time_s_median": r.step_time_s_median,
                    "first_loss": r.first_loss,
                    "final_loss": r.final_loss,
                    "wall_s": r.wall_s,
                    "mb_sent_per_node": [mb(n.tx_bytes) for n in r.nodes],
                    "mb_startup_per_node": [mb(n.startup_tx_bytes) for n in r.nodes],
                    "mb_per_step_per_node": [mb(b) for b in steady],
                    "steps": len(r.steps),
                    # every steady step's time: interpret.bandwidth judges the caps against this spread
                    "step_times_s": [
                        x["step_time_s"] for x in r.steps[1:] if x.get("step_time_s") is not None
                    ],
                }
            )
        return rows

    def to_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data["table"] = self.table()

        data["versions"] = versions()
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")
        return path


def choose_mode(mode: str, nodes: int = 2) -> tuple[str, str]:
    """(mode, reason): 'auto' -> "netns" when namespaces can be created here, else "loopback"; the reason
    is shown to the learner."""
    check_choice("netsim mode", mode, MODES)
    if mode == "loopback":
        return "loopback", _("loopback requested")
    ok, why = netns_available()
    if ok:
        return "netns", why
    if mode == "netns":
        raise WorkshopError(f"network namespaces are not available here: {why}")
    return (
        "loopback",
        _("{why}: falling back to {nodes} node groups on loopback (no rate caps, no per-node bytes)").format(
            why=why, nodes=nodes
        ),
    )


def _prepare(cfg: NetSimConfig, progress=print) -> None:
    """One-time costs, paid before the first cap is timed so every cap's wall time means the same thing: the
    DeepSpeed ops the ranks would compile, and the local corpus + tokenizer the preset trains on."""

    args = cfg.train_args
    if not isinstance(args, TrainArgs):
        return  # raw argv: the ranks prepare whatever it needs
    build_ops(args, progress)
    if args.model in PRESETS and args.dataset == "local":
        local_kit(Path(args.cache_dir).expanduser())


def run(cfg: NetSimConfig, progress=print) -> NetSimReport:
    """Run the training command on `cfg.nodes` simulated nodes at each rate cap; always tears down. Returns
    the NetSimReport: per cap the step times (s), loss and bytes each node sent (MB); `.table()` as rows."""
    mode, reason = choose_mode(cfg.mode, cfg.nodes)
    progress(
        _("netsim: {nodes} nodes x {procs} procs, mode={mode} ({reason})").format(
            nodes=cfg.nodes, procs=cfg.procs_per_node, mode=mode, reason=reason
        )
    )
    _prepare(cfg, progress)
    results = []
    if mode == "netns":
        with Topology(cfg.nodes, cfg.subnet, cfg.prefix) as topo:
            if not topo.reachable():
                raise WorkshopError("the namespaces were created but node 0 cannot reach the others")
            for rate in cfg.rates:
                results.append(run_cap(cfg, rate, topo, progress))
    else:
        for rate in cfg.rates:
            if parse_rate(rate) is not None:
                progress(f"  note: rate cap {rate} cannot be applied on loopback; running uncapped")
            results.append(run_cap(cfg, rate, None, progress))
    return NetSimReport(
        mode=mode,
        reason=reason,
        nodes=cfg.nodes,
        procs_per_node=cfg.procs_per_node,
        train_args=(
            cfg.train_args.to_argv() if isinstance(cfg.train_args, TrainArgs) else list(cfg.train_args)
        ),
        results=results,
        weights_mb=_weights_mb(cfg.train_args),
    )


def _weights_mb(args: TrainArgs | list[str]) -> float | None:
    if not isinstance(args, TrainArgs) or args.model not in PRESETS:
        return None

    precision = resolve_precision(args.precision)[0]
    return round(architecture(args.model).params * (2 if precision == "bf16" else 4) / 1e6, 1)
