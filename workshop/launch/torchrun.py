"""Start torchrun of the training entry point from a notebook or a script, with live progress.

torchrun owns the ranks (and tears all of them down when one dies); this module builds its command,
checks the request fits the machine before anything starts, streams the merged log to a file while
updating a progress bar from the METRIC lines, and hands back the log, the metrics and the exit code.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError, check_positive
from workshop.lang import _
from workshop.launch import ledger
from workshop.launch.procs import run_captured, stop_tree
from workshop.launch.progress import bar
from workshop.paths import REPO
from workshop.train.args import TrainArgs, from_argv
from workshop.train.dsprobe import extensions_dir as versioned
from workshop.train.logs import parse_metrics
from workshop.train.shm import SHM_DIR, SHM_GLOB, release_orphaned_buffers


@dataclass
class RunResult:
    returncode: int
    log: str
    steps: list[dict] = field(default_factory=list)
    metrics: dict | None = None  # the run's metrics.json, when it finished
    log_path: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def failure(self) -> str | None:
        """The failing rank's own error, read from torchrun's output (None when the run succeeded)."""
        return None if self.ok else rank_failure(self.log, self.returncode)

    def check(self) -> RunResult:
        """Raise with the failing rank's own exception: a failure must be loud, never a quiet empty table."""
        if not self.ok:
            raise RuntimeError(f"{self.failure}\n(whole log: {self.log_path})")
        return self

    def finished_metrics(self) -> dict:
        """The metrics.json of a run that succeeded. A run can exit 0 without writing one; every reader would
        then fail later on None, far from the cause: say so here instead."""
        self.check()
        if self.metrics is None:
            raise RuntimeError(f"the run exited 0 but wrote no metrics.json (whole log: {self.log_path})")
        return self.metrics


class RunHung(TimeoutError):
    """The run made no progress within its timeout and was stopped."""


_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):(.*?)(?:\n=====|\Z)", re.DOTALL)
_RANK_LINE = re.compile(r"^\[default(\d+)\]:(.*)$")


def rank_failure(log: str, returncode: int | None = None) -> str:
    """ "rank R failed (exit E): Type: message" plus the innermost frames of this project, from torchrun's
    Root Cause block (the rank's @record traceback), or the rank's own `error: ...` line (bad input, exit 2),
    or the signal that killed it."""
    block = _ROOT_CAUSE.search(log)
    rank = exit_text = None
    detail, frames = "", []
    if block:
        text = block.group(1)
        rank = (re.search(r"rank\s*:\s*(\d+)", text) or [None, None])[1]
        code = re.search(r"exitcode\s*:\s*(-?\d+)", text)
        exit_text = code.group(1) if code else None
        tb = text.split("traceback :", 1)[1] if "traceback :" in text else ""
        lines = [ln.strip() for ln in tb.splitlines() if ln.strip()]
        if lines and not lines[0].startswith("To enable traceback"):
            detail = lines[-1]
            frames = [ln for ln in lines if ln.startswith("File ") and "/workshop/" in ln][-2:]
        elif exit_text and int(exit_text) < 0:
            detail = f"killed by {signal.Signals(-int(exit_text)).name}"
    if not detail:  # a WorkshopError: the rank printed one `error: ...` line and exited 2
        errors = [ln for ln in log.splitlines() if "error: " in ln and not ln.lstrip().startswith("[rank")]
        own = [(_RANK_LINE.match(ln.strip()), ln) for ln in errors]
        if own:
            m, line = own[0]
            rank = rank or (m.group(1) if m else None)
            detail = (m.group(2) if m else line).strip()
    if not detail:
        detail = "no exception was reported; last lines:\n" + "\n".join(log.splitlines()[-15:])
    head = f"rank {rank if rank is not None else '?'} failed (exit {exit_text or returncode}): {detail}"
    return head + "".join(f"\n  at {f}" for f in frames)


def last_lines_per_rank(lines: list[str]) -> dict[str, str]:
    """The last line each rank printed (torchrun --tee prefixes them "[defaultN]:")."""
    last: dict[str, str] = {}
    for line in lines:
        m = _RANK_LINE.match(line.strip())
        if m and m.group(2).strip():
            last[f"rank {m.group(1)}"] = m.group(2).strip()
    return last


def check_fits(
    nproc_per_node: int, threads_per_rank: int | None, *, allow_oversubscribe: bool = False
) -> None:
    """Refuse, before launching, a request this machine cannot hold: each rank needs at least one core."""
    check_positive("nproc_per_node", nproc_per_node)
    if threads_per_rank is not None:
        check_positive("threads_per_rank", threads_per_rank)
    cores = os.cpu_count() or 1
    if nproc_per_node > cores and not allow_oversubscribe:
        raise WorkshopError(
            f"nproc_per_node={nproc_per_node} is more ranks than this machine has cores ({cores}); "
            f"allowed: 1..{cores} (or pass allow_oversubscribe=True)"
        )
    if threads_per_rank and nproc_per_node * threads_per_rank > cores and not allow_oversubscribe:
        raise WorkshopError(
            f"{nproc_per_node} ranks x {threads_per_rank} threads = "
            f"{nproc_per_node * threads_per_rank} threads on {cores} cores; "
            f"allowed threads_per_rank: 1..{max(1, cores // nproc_per_node)}"
        )


def extensions_dir() -> Path:
    """Where DeepSpeed's JIT-built C++ ops are cached (one folder per DeepSpeed version; see
    workshop.train.dsprobe)."""

    return versioned()


def ops_to_build(args) -> list[str]:
    """DeepSpeed ops this run (a TrainArgs) will compile because no cached build exists, so the wait is
    announced, not silent."""
    if args.engine != "deepspeed" and args.allreduce == "backend":
        return []
    needed = ["deepspeed_shm_comm"] + (["cpu_adam"] if args.offload_optimizer else [])
    built = {p.parent.name for p in extensions_dir().glob("**/*.so")}
    return [op for op in needed if op not in built]


# DeepSpeed's op builders by the name its JIT cache gives their builds
OP_BUILDERS = {"deepspeed_shm_comm": "ShareMemCommBuilder", "cpu_adam": "CPUAdamBuilder"}


def op_build_command(ops: list[str]) -> list[str]:
    """The command that compiles DeepSpeed's `ops` into this version's cache, as the ranks would."""
    code = "from workshop.train.dsprobe import use_versioned_extensions_dir\nuse_versioned_extensions_dir()\n"
    for builder in (OP_BUILDERS[op] for op in ops):
        code += f"from deepspeed.ops.op_builder.cpu import {builder}\n{builder}().load(verbose=False)\n"
    return [sys.executable, "-c", code]


def start_op_build(args) -> subprocess.Popen | None:
    """Start compiling, in the background, the DeepSpeed ops a run of `args` will need (None: all built), so
    the compile overlaps work that measures nothing. A rank that needs an op while it builds waits for
    torch's build lock and loads the result; a build that fails leaves the ranks to try and report it."""
    pending = ops_to_build(args)
    if not pending:
        return None
    return subprocess.Popen(
        op_build_command(pending),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=rank_env(None, cpu_only=True),
        start_new_session=True,
    )


def build_ops(args, progress=print) -> list[str]:
    """Compile the DeepSpeed ops a run will need, once, before anything is timed: a rank that compiles on
    first use spends ~40 s (2 cores) inside its first step, and the first of several timed runs looks slow."""
    pending = ops_to_build(args)
    for op in pending:
        progress(
            f"note: compiling DeepSpeed's {op} once (about a minute on 2 cores); cached in {extensions_dir()}"
        )
        r = run_captured(op_build_command([op]), timeout=900)
        if r.returncode != 0:  # the rank will try again and report the compiler's error itself
            progress(f"note: {op} did not build here ({(r.stderr or r.stdout).strip().splitlines()[-1:]})")
    return pending


def torchrun_command(
    module_args: list[str],
    *,
    nproc_per_node: int = 2,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    rdzv_id: str = "workshop",
    rdzv_conf: str | None = None,
    local_addr: str | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    max_restarts: int = 0,
    module: str = "workshop.train",
    prefix: list[str] | None = None,
) -> list[str]:
    """THE torchrun command line, for training, loading, collectives, benchmarks and netsim alike.

    One node without a rendezvous endpoint runs `--standalone` (a free port) unless a master address/port is
    given; several nodes meet at a c10d rendezvous. `--tee=3` prefixes each rank's lines with "[defaultN]:",
    so the launcher can name the rank a failure or a hang belongs to.
    """
    cmd = list(prefix or []) + [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc_per_node}",
        f"--max-restarts={max_restarts}",
        "--tee=3",
    ]
    if nnodes > 1 or rdzv_endpoint is not None:
        cmd += [
            f"--nnodes={nnodes}",
            f"--node-rank={node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv_endpoint}",
            f"--rdzv-id={rdzv_id}",
        ]
        if rdzv_conf:
            cmd.append(f"--rdzv-conf={rdzv_conf}")
    elif master_addr or master_port:
        cmd += [f"--master-addr={master_addr or '127.0.0.1'}", f"--master-port={master_port or 29500}"]
    else:
        cmd.append("--standalone")
    if local_addr:
        cmd.append(f"--local-addr={local_addr}")
    return cmd + ["-m", module, *module_args]


def rank_env(
    threads_per_rank: int | None,
    env: dict | None = None,
    *,
    nproc_per_node: int | None = None,
    cpu_only: bool = False,
) -> dict:
    """THE environment every rank inherits, whoever launches it. Set before torch starts (OpenMP and DeepSpeed
    read these once): threads per rank, DeepSpeed's LOCAL_SIZE (its CPU shm collective needs it; torchrun sets
    only LOCAL_WORLD_SIZE), the compiled-op cache of this DeepSpeed version, this checkout on PYTHONPATH, and
    for CPU recipes no visible GPU (a CPU run on a GPU host must not pick nccl or crowd one GPU)."""
    out = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        TOKENIZERS_PARALLELISM="false",
        TORCH_EXTENSIONS_DIR=str(extensions_dir()),
        PYTHONPATH=os.pathsep.join(p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p),
    )
    if threads_per_rank:
        out.update(OMP_NUM_THREADS=str(threads_per_rank), MKL_NUM_THREADS=str(threads_per_rank))
    if nproc_per_node:
        out["LOCAL_SIZE"] = str(nproc_per_node)
    if cpu_only:
        out["CUDA_VISIBLE_DEVICES"] = ""
    out.update(env or {})
    return out


@dataclass
class _Job:
    """What run_torchrun starts, read from its arguments: the module's argv, where the run writes, how many
    steps to expect, and the TrainArgs when it is the training entry point."""

    argv: list[str]
    out_dir: Path
    log_path: Path
    max_steps: int | None = None
    train_args: TrainArgs | None = None

    @property
    def cpu_only(self) -> bool:  # a CPU recipe sees no GPU; a GPU recipe says so with backend "nccl"
        return self.train_args is not None and self.train_args.backend != "nccl"


def _job(train_args, module: str, log_path: str | Path | None, node_rank: int) -> _Job:
    """The training entry point's arguments are validated here, before any process starts, and rendered to a
    command line; any other module's argv is passed on as it is."""
    targs = None
    if module == "workshop.train":
        targs = train_args if isinstance(train_args, TrainArgs) else from_argv(train_args)
        targs.validate()
        out_dir = Path(targs.output_dir)
    else:
        out_dir = Path(log_path).parent if log_path else Path("out")
    log = Path(log_path) if log_path else out_dir / f"torchrun-node{node_rank}.log"
    if targs is None:
        return _Job(list(train_args), out_dir, log)
    return _Job(targs.to_argv(), out_dir, log, targs.max_steps, targs)


def _sweep_orphaned_buffers(say) -> None:
    swept = release_orphaned_buffers()
    if swept:
        say(
            f"note: removed {len(swept)} DeepSpeed shared-memory buffer(s) in {SHM_DIR} that no process held "
            f"(left by a run that was killed with its launcher)"
        )


def _lines(proc: subprocess.Popen) -> queue.Queue:
    """proc's output, line by line, then None: a thread reads, so the timeout is enforced even when no line
    ever arrives."""
    inbox: queue.Queue = queue.Queue()

    def pump():
        assert proc.stdout is not None  # Popen(stdout=PIPE)
        for text in proc.stdout:
            inbox.put(text)
        inbox.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return inbox


@dataclass(frozen=True)
class _Limits:
    """When a run counts as hung: `timeout` seconds in all, or `step_timeout` seconds from one step to the
    next (a hung collective: every rank waits, none prints). The step limit needs no guess of how long
    start-up takes on a busy machine, only of how long one step may, a checkpoint save included. It is armed
    by rank 0's first METRIC line and disarmed by its last (`max_steps`: saving the model and leaving are not
    steps), so a hang before the first step is for `timeout` to catch. Times are time.monotonic() seconds."""

    timeout: float | None = None
    step_timeout: float | None = None
    max_steps: int | None = None

    def exceeded(self, t0: float, last_step_at: float | None, last_step: int) -> str | None:
        now = time.monotonic()
        if self.timeout and now - t0 > self.timeout:
            return f"run stopped after {self.timeout:g} s without finishing"
        if self.step_timeout and last_step_at is not None:
            stepping = self.max_steps is None or last_step < self.max_steps
            if stepping and now - last_step_at > self.step_timeout:
                return (
                    f"run stopped: no step for {self.step_timeout:g} s after step {last_step} (step_timeout)"
                )
        return None


def _follow(
    proc: subprocess.Popen, job: _Job, *, bar, echo: bool, limits: _Limits, t0: float
) -> tuple[list[str], list[dict], float | None]:
    """Copy the merged log to job.log_path, collect the METRIC records and move the bar, until the output
    ends; raise RunHung, naming each rank's last line, when the run outlives its limits. Returns the lines,
    the records and the seconds from t0 to the first record's arrival (None: no step)."""
    lines: list[str] = []
    steps: list[dict] = []
    last_step_at = None
    first_at = None
    held_out = None  # the last held-out loss, shown on the bar until the next evaluation
    inbox = _lines(proc)
    with open(job.log_path, "w") as log:
        while (line := _next_line(inbox)) is not None:
            if line:
                log.write(line)
                lines.append(line)
                if echo:
                    print(line, end="")
                for rec in parse_metrics(line):
                    steps.append(rec)
                    last_step_at = time.monotonic()
                    first_at = first_at if first_at is not None else round(last_step_at - t0, 2)
                    if bar is not None:
                        bar.update(rec["step"] - bar.n)
                        held_out = rec.get("eval_loss", held_out)  # the last evaluation's, until the next
                        bar.set_postfix(
                            loss=rec["loss"],
                            tok_s=rec["tokens_per_s"],
                            **({"eval_loss": held_out} if held_out is not None else {}),
                        )
            if why := limits.exceeded(t0, last_step_at, steps[-1]["step"] if steps else 0):
                last = last_lines_per_rank(lines)
                silent = "; ".join(f"{r}: {t[:160]}" for r, t in sorted(last.items())) or "no rank printed"
                raise RunHung(f"{why} (hung?); last line of each rank: {silent}; log: {job.log_path}")
    return lines, steps, first_at


def _next_line(inbox: queue.Queue) -> str | None:
    """The next line, "" when none came within a second (time to check the timeout), None at the end."""
    try:
        return inbox.get(timeout=1.0)
    except queue.Empty:
        return ""


def _start_and_follow(
    cmd: list[str], env: dict, job: _Job, *, bar, echo: bool, limits: _Limits
) -> tuple[int, list[str], list[dict], float]:
    """Run cmd to its end: (exit code, lines, METRIC records, seconds). Whatever way it ends, nothing is left
    behind: an exception or a hang stops torchrun and every rank, and the /dev/shm buffers of ranks that died
    are released."""
    shm_before = set(SHM_DIR.glob(SHM_GLOB))
    cpu0 = ledger.children_cpu_s()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=env,
        start_new_session=True,
    )
    try:
        lines, steps, first_at = _follow(proc, job, bar=bar, echo=echo, limits=limits, t0=t0)
        proc.wait()
    except BaseException:
        stop_tree(proc.pid)  # torchrun and every rank: nothing half-running is left behind
        proc.wait()
        raise
    finally:
        if bar is not None:
            bar.close()  # in a notebook the widget becomes its final line as text (workshop.launch.progress)
        if (
            proc.returncode != 0
        ):  # ranks that died never released DeepSpeed's /dev/shm buffers: do it for them
            release_orphaned_buffers(set(SHM_DIR.glob(SHM_GLOB)) - shm_before)  # a concurrent run's stay
    seconds = round(time.monotonic() - t0, 2)
    ledger.record(cmd, seconds, ledger.children_cpu_s() - cpu0, steps, first_at, exit=proc.returncode)
    return proc.returncode, lines, steps, seconds


def run_torchrun(
    train_args,
    *,
    nproc_per_node: int = 2,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    threads_per_rank: int | None = None,
    env: dict | None = None,
    log_path: str | Path | None = None,
    progress: bool = True,
    timeout: float | None = None,
    step_timeout: float | None = None,
    module: str = "workshop.train",
    prefix: list[str] | None = None,
    echo: bool = False,
    max_restarts: int = 0,
    allow_oversubscribe: bool = False,
) -> RunResult:
    """Run torchrun to completion; returns a RunResult (call .check() to raise on failure): the return code,
    the log (text and path), wall seconds, each step's METRIC line (loss, tokens/s) and metrics.json.

    `train_args` is a workshop.train.TrainArgs (argv is accepted too and parsed once, here): it is validated
    before any process starts and rendered to the command line only at the last moment. CPU recipes run with
    no visible GPU; a GPU recipe says so with backend "nccl". `timeout` (seconds in all) and `step_timeout`
    (seconds from one step to the next, once the first step is logged) stop a hung run and every rank of it,
    raising RunHung.
    """
    check_fits(nproc_per_node, threads_per_rank, allow_oversubscribe=allow_oversubscribe)
    for name, limit in (("timeout", timeout), ("step_timeout", step_timeout)):
        if limit is not None:
            check_positive(name, limit)
    job = _job(train_args, module, log_path, node_rank)
    cmd = torchrun_command(
        job.argv,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        max_restarts=max_restarts,
        module=module,
        prefix=prefix,
    )
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    say = (lambda m: print(m, flush=True)) if progress else (lambda m: None)
    if job.train_args is not None and ops_to_build(job.train_args):
        build_ops(job.train_args, progress=say)
    steps_bar = bar(job.max_steps, "training", unit="step") if progress else None
    _sweep_orphaned_buffers(say)
    env = rank_env(threads_per_rank, env, nproc_per_node=nproc_per_node, cpu_only=job.cpu_only)
    limits = _Limits(timeout, step_timeout, job.max_steps)
    code, lines, steps, seconds = _start_and_follow(cmd, env, job, bar=steps_bar, echo=echo, limits=limits)
    metrics_file = job.out_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if code == 0 and metrics_file.exists() else None
    return RunResult(code, "".join(lines), steps, metrics, str(job.log_path), seconds)


def sweep_threads(
    train_args, settings: list[int], *, nproc_per_node: int = 2, steps: int = 8, rounds: int = 1
) -> list[dict]:
    """The same job under each threads-per-rank setting, `steps` steps per setting per round, rounds
    interleaved (A B A B); one row (dict) per setting: threads, tokens/s per steady step ("samples") and per
    round ("rounds").

    One launch runs them all: the settings take turns in blocks of `steps` optimizer steps inside the same
    ranks (workshop.train.threads sets torch's thread count before each step, and every step's record says
    the count it ran with), so the ranks' start-up is paid once instead of once per block. Each row keeps
    every steady step's tokens/s (the first step of each block, which settles the new thread pool, left
    out) and each block's median, so report.verdict can tell a difference from the machine's noise.
    `train_args` is a workshop.train.TrainArgs; the run writes to `<output_dir>-threads`. Settings that
    oversubscribe the cores are allowed on purpose: that is what the sweep shows.
    """
    from dataclasses import replace

    from workshop.train.threads import THREADS_BY_STEP

    label = _("{n} ranks x {t} threads")
    rows: dict[int, dict] = {
        t: dict(label=label.format(n=nproc_per_node, t=t), threads=t, samples=[], times=[], rounds=[])
        for t in settings
    }
    order = [(r, t) for r in range(rounds) for t in settings]
    schedule = [t for _r, t in order for _ in range(steps)]
    args = replace(train_args, max_steps=len(schedule), output_dir=f"{train_args.output_dir}-threads")
    run = run_torchrun(
        args,
        nproc_per_node=nproc_per_node,
        threads_per_rank=max(settings),  # OpenMP's pool starts at its largest; each step then takes its share
        env={THREADS_BY_STEP: ",".join(map(str, schedule))},
        allow_oversubscribe=True,
        progress=False,
    )
    records = run.finished_metrics()["steps"]
    ran = [s.get("threads") for s in records]
    if ran != schedule:  # a sweep whose steps did not run with the counts asked for would compare nothing
        raise RuntimeError(
            f"thread sweep: steps ran with {ran} threads, asked {schedule} (log: {run.log_path})"
        )
    _split_blocks(records, order, steps, rows)
    for row in rows.values():
        xs = row["samples"] or row["rounds"]
        row.update(
            tokens_per_s=round(statistics.median(xs), 1),
            range=f"{min(xs):.0f}-{max(xs):.0f}",
            step_time_s=round(statistics.median(row["times"]), 3) if row["times"] else None,
        )
    return list(rows.values())


def _split_blocks(
    records: list[dict], order: list[tuple[int, int]], steps: int, rows: dict[int, dict]
) -> None:
    """Each block of `steps` records into its setting's row: steady samples and step times (the block's first
    step left out), the block's median as a round; printed in the order the blocks ran."""
    from workshop.report.verdict import steady

    for i, (_r, t) in enumerate(order):
        block, row = records[i * steps : (i + 1) * steps], rows[t]
        speeds = steady([s.get("tokens_per_s") for s in block])
        row["samples"] += speeds
        row["times"] += steady([s.get("step_time_s") for s in block])
        row["rounds"].append(statistics.median(speeds))
        print(
            _("[{i}/{n}] {label}, {steps} steps ...").format(
                i=i + 1, n=len(order), label=row["label"], steps=steps
            ),
            _("{speed:.0f} tokens/s in {seconds:.0f} s").format(
                speed=row["rounds"][-1], seconds=sum(s.get("step_time_s") or 0 for s in block)
            ),
            flush=True,
        )
