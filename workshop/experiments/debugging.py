"""The debugging switches the original workshop sets, what each one does, and what to read in a run that has
them on.

A distributed job that hangs or diverges rarely says why by default. These environment variables make the
layers talk: torch.distributed's own checks (TORCH_DISTRIBUTED_DEBUG), its C++ logging (TORCH_CPP_LOG_LEVEL),
gloo's (GLOO_LOG_LEVEL) and NCCL's (NCCL_DEBUG), and Inductor's compile workers. `debug_run` trains the tiny
model for a few steps with them on, through the one launch path, and `summarize` picks out the lines worth
reading from the thousand it prints.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from workshop.lang import N_, _
from workshop.launch.torchrun import run_torchrun
from workshop.report.verdict import MIN_ROUNDS, compare, steady


class _Explained(dict):
    """A dict of switch -> explanation whose values read in the learner's language (`_()` where shown)."""

    def __getitem__(self, key: str) -> str:
        return _(super().__getitem__(key))

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]


SWITCHES = _Explained(
    {
        "TORCH_DISTRIBUTED_DEBUG=DETAIL": N_(
            "wraps every process group: before each collective the ranks compare a fingerprint (sequence "
            "number, op, shapes, dtypes), so a rank that calls a different collective fails at once with "
            "both fingerprints instead of hanging. Costs an extra small collective per call."
        ),
        "TORCH_CPP_LOG_LEVEL=INFO": N_(
            "lets the C++ side of torch.distributed log: the rendezvous (TCPStore keys each rank waits for) "
            "and, with DETAIL, every fingerprint."
        ),
        "GLOO_LOG_LEVEL=TRACE": N_(
            "gloo's own log level (the original workshop's switch); gloo itself says little, most of what "
            "you see comes from torch's wrapper."
        ),
        "NCCL_DEBUG=INFO": N_(
            "NCCL only (GPUs): prints the transport each channel uses (P2P/CUMEM, NET/Libfabric, "
            "NET/Socket); on a CPU run with gloo it prints nothing."
        ),
        "TORCHINDUCTOR_COMPILE_THREADS=N": N_(
            "torch.compile's Inductor compiles kernels in N worker processes per rank; with many ranks per "
            "node, N x ranks workers compete with training for cores: set it small (1-4)."
        ),
        "TORCHINDUCTOR_CACHE_DIR=path": N_(
            "where Inductor keeps compiled kernels between runs (the original workshop keeps it out of /tmp "
            "so a restart does not recompile)."
        ),
    }
)
DEBUG_ENV = {
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_CPP_LOG_LEVEL": "INFO",
    "GLOO_LOG_LEVEL": "TRACE",
    "NCCL_DEBUG": "INFO",
}
_FP = re.compile(
    r"\[Rank (\d+)\] Running collective: CollectiveFingerPrint\(SequenceNumber=(\d+),? ?OpType=(\w+)"
)


@dataclass
class DebugSummary:
    lines: int
    fingerprints: Counter  # OpType -> count (rank 0)
    last_sequence: dict  # rank -> last SequenceNumber seen: equal when the ranks agree
    rendezvous_lines: int
    nccl_lines: int
    examples: list[str]
    tokens_per_s: float | None
    samples: list[float] = field(default_factory=list)  # steady steps' tokens/s with the checks on
    plain_samples: list[float] = field(default_factory=list)  # the same job without them, same steps
    rounds: int = 1  # interleaved rounds (plain, debug) the samples come from: under MIN_ROUNDS, no verdict


def summarize(log: str, tokens_per_s: float | None = None) -> DebugSummary:
    """The few facts to read out of a debug log: collectives by type, the ranks' last sequence numbers, and
    one example line of each kind."""
    fps: Counter = Counter()
    last: dict[int, int] = {}
    examples: dict[str, str] = {}
    rdzv = nccl = 0
    lines = log.splitlines()
    for line in lines:
        m = _FP.search(line)
        if m:
            rank, seq, op = int(m[1]), int(m[2]), m[3]
            last[rank] = max(last.get(rank, 0), seq)
            if rank == 0:
                fps[op] += 1
            examples.setdefault(f"fingerprint {op}", line.split("] ", 2)[-1][:200])
        elif "torch.rendezvous" in line or "TCPStore" in line:
            rdzv += 1
            if "wait key" in line:
                examples.setdefault("rendezvous", line.split("] ", 2)[-1][:200])
        elif "NCCL INFO" in line:
            nccl += 1
            examples.setdefault("nccl", line[:200])
    keep = [
        examples[k]
        for k in (
            "rendezvous",
            "fingerprint _ALLGATHER_BASE",
            "fingerprint _REDUCE_SCATTER_BASE",
            "fingerprint BROADCAST",
            "nccl",
        )
        if k in examples
    ]
    return DebugSummary(len(lines), fps, last, rdzv, nccl, keep, tokens_per_s)


def debug_run(train_args, *, nproc: int = 2, threads: int = 1, rounds: int = 1) -> DebugSummary:
    """Train with every debugging switch on and, interleaved with it, the same job without them (the same
    steps, `rounds` times each: plain, debug, plain, debug ...), so the checks' cost is measured like for
    like, through workshop.launch.torchrun.run_torchrun.

    Returns a DebugSummary of the last debug run's log (collectives by type, the ranks' last sequence
    numbers, example lines) with every round's steady tokens/s: `samples` with the checks on, `plain_samples`
    without."""
    from dataclasses import replace

    got: dict[str, list[float]] = {"plain": [], "debug": []}
    log, tps = "", None
    for r in range(rounds):
        for kind in ("plain", "debug"):
            args = replace(train_args, output_dir=f"{train_args.output_dir}-{kind}-r{r}")
            run = run_torchrun(
                args,
                nproc_per_node=nproc,
                threads_per_rank=threads,
                env=DEBUG_ENV if kind == "debug" else None,
                progress=False,
            ).check()
            m = run.metrics or {}
            got[kind] += steady([s.get("tokens_per_s") for s in m.get("steps", [])])
            if kind == "debug":
                log, tps = run.log, m.get("tokens_per_s_median")
    s = summarize(log, tps)
    s.samples, s.plain_samples, s.rounds = got["debug"], got["plain"], rounds
    return s


def report(s: DebugSummary) -> str:
    """The facts worth reading, and the checks' cost from like-for-like samples (report.verdict), as the text
    chapter 04 prints (one string; step times in s, the cost in %)."""
    out = [
        _("{lines} log lines; {n} collectives checked on rank 0: {ops}").format(
            lines=s.lines,
            n=sum(s.fingerprints.values()),
            ops=", ".join(f"{op} {n}" for op, n in s.fingerprints.most_common()),
        ),
        (
            _("last sequence number per rank: {seq} (equal: the ranks issued the same collectives)")
            if len(set(s.last_sequence.values())) == 1
            else _(
                "last sequence number per rank: {seq} (DIFFERENT: a rank is behind or called another "
                "collective)"
            )
        ).format(seq=s.last_sequence),
        (
            _("rendezvous/store lines: {store}; NCCL lines: {nccl}")
            if s.nccl_lines
            else _("rendezvous/store lines: {store}; NCCL lines: {nccl} (none: gloo on CPU)")
        ).format(store=s.rendezvous_lines, nccl=s.nccl_lines),
    ]
    if s.samples and s.plain_samples:
        off = _("checks off")
        v = compare(s.samples, s.plain_samples, a_label=_("checks on"), b_label=off, rounds=s.rounds)
        out.append(
            _("throughput, the same steps with and without the checks: ")
            + v.sentence
            + (
                _("; the checks' extra collective per call shows")
                if v.clear and v.winner == off
                else _("; what they cost grows with the collectives per step")
                if s.rounds < MIN_ROUNDS
                else _(
                    "; here their cost does not show above the noise; it grows with the collectives per step"
                )
            )
            + _(". Switch them off for real runs: they log every collective and fingerprint each one.")
        )
    out += [_("examples:"), *(f"  {e}" for e in s.examples)]
    return "\n".join(out)
