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
from dataclasses import dataclass

from workshop.launch.torchrun import run_torchrun

SWITCHES = {
    "TORCH_DISTRIBUTED_DEBUG=DETAIL": "wraps every process group: before each collective the ranks compare a "
    "fingerprint (sequence number, op, shapes, dtypes), so a rank that calls a different collective fails "
    "at once with both fingerprints instead of hanging. Costs an extra small collective per call.",
    "TORCH_CPP_LOG_LEVEL=INFO": "lets the C++ side of torch.distributed log: the rendezvous (TCPStore keys "
    "each rank waits for) and, with DETAIL, every fingerprint.",
    "GLOO_LOG_LEVEL=TRACE": "gloo's own log level (the original workshop's switch); gloo itself says little, "
    "most of what "
    "you see comes from torch's wrapper.",
    "NCCL_DEBUG=INFO": "NCCL only (GPUs): prints the transport each channel uses (P2P/CUMEM, NET/Libfabric, "
    "NET/Socket); on a CPU run with gloo it prints nothing.",
    "TORCHINDUCTOR_COMPILE_THREADS=N": "torch.compile's Inductor compiles kernels in N worker processes per "
    "rank; "
    "with many ranks per node, N x ranks workers compete with training for cores: set it small (1-4).",
    "TORCHINDUCTOR_CACHE_DIR=path": "where Inductor keeps compiled kernels between runs (the original "
    "workshop keeps it out of "
    "/tmp so a restart does not recompile).",
}
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


def debug_run(train_args, *, nproc: int = 2, threads: int = 1) -> DebugSummary:
    """Train with every debugging switch on (few steps), through workshop.launch.torchrun.run_torchrun."""
    from dataclasses import replace

    args = replace(train_args, output_dir=f"{train_args.output_dir}-debug")
    run = run_torchrun(
        args, nproc_per_node=nproc, threads_per_rank=threads, env=DEBUG_ENV, progress=False
    ).check()
    return summarize(run.log, run.metrics["tokens_per_s_median"] if run.metrics else None)


def report(s: DebugSummary, *, plain_tokens_per_s: float | None = None) -> str:
    out = [
        f"{s.lines} log lines; {sum(s.fingerprints.values())} collectives checked on rank 0: "
        + ", ".join(f"{op} {n}" for op, n in s.fingerprints.most_common()),
        f"last sequence number per rank: {s.last_sequence} ("
        + (
            "equal: the ranks issued the same collectives"
            if len(set(s.last_sequence.values())) == 1
            else "DIFFERENT: a rank is behind or called another collective"
        )
        + ")",
        f"rendezvous/store lines: {s.rendezvous_lines}; NCCL lines: {s.nccl_lines}"
        + (" (none: gloo on CPU)" if not s.nccl_lines else ""),
    ]
    if plain_tokens_per_s and s.tokens_per_s:
        out.append(
            f"throughput with the checks on: {s.tokens_per_s:.0f} tokens/s vs {plain_tokens_per_s:.0f} "
            "without "
            f"(x{s.tokens_per_s / plain_tokens_per_s:.2f}): switch them off for real runs"
        )
    out += ["examples:", *(f"  {e}" for e in s.examples)]
    return "\n".join(out)
