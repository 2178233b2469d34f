"""Issue 37's truth test: the workbook's verdicts measured on purpose under load (a CPU burner pinned beside
the measurement), twice. No verdict may claim a clear result its samples do not support: an A/A comparison
(the same work twice) is never a win, and a real difference that is called clear is called the same way both
times. Chapter 04's threads sweep runs for real at its smallest (tiny model, one rank, 3 steps, both settings:
with two ranks, their spin-waiting collectives and a burner on a 2-core runner, a run takes tens of
minutes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from workshop.report import interpret
from workshop.report.verdict import compare, share

pytestmark = pytest.mark.slow


@pytest.fixture
def burner():
    """A busy-loop process on this machine's first CPU, as a browser tab or a neighbour's job would be."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(p.pid, {sorted(os.sched_getaffinity(0))[0]})
        yield p
    finally:
        p.kill()
        p.wait()


def _work(n: int) -> float:
    """Seconds for `n` matmuls of a fixed size: the same work always, whatever else the CPU does."""
    import torch

    x = torch.randn(192, 192)
    t0 = time.perf_counter()
    for _ in range(n):
        x = torch.tanh(x @ x)
    return time.perf_counter() - t0


def _interleaved(a: int, b: int, rounds: int = 6) -> tuple[list[float], list[float]]:
    xa, xb = [], []
    _work(a)  # warm-up, left out
    for _ in range(rounds):
        xa.append(_work(a))
        xb.append(_work(b))
    return xa, xb


def test_same_work_is_never_a_win_and_a_real_difference_never_flips(burner):
    said = []
    for _ in range(2):
        same = compare(
            *_interleaved(40, 40), a_label="A", b_label="A again", unit="s", higher_is_better=False
        )
        assert not same.clear, same.sentence  # the same work twice: any "win" is the burner talking
        double = compare(*_interleaved(40, 80), a_label="A", b_label="2A", unit="s", higher_is_better=False)
        said.append(double)
    clear = [v for v in said if v.clear]
    assert len({v.winner for v in clear}) <= 1 and all(v.winner == "A" for v in clear), [
        v.sentence for v in said
    ]


def test_a_share_against_a_reference_measured_around_it_is_only_quoted_when_it_held(burner):
    for _ in range(2):
        ref_start = _work(40)
        part = [_work(40) for _ in range(3)]
        ref_end = _work(40)
        # rates: work per second; the part is the same work as the reference, so its true share is 100%
        s = share([1 / t for t in part], [1 / ref_start, 1 / ref_end], part_label="A", reference_label="ref")
        assert s.low <= s.pct <= s.high
        if s.clear:
            assert s.drift_pct <= 10 and s.pct <= 100, s.sentence
        else:
            assert ("between" in s.sentence) or ("measured low" in s.sentence), s.sentence


def test_chapter_04_threads_verdict_holds_twice_under_load(kit_cache, tmp_path, burner):
    from workshop.launch.torchrun import sweep_threads
    from workshop.train import TrainArgs

    args = TrainArgs(
        model="tiny",
        max_steps=3,
        seq_len=64,
        micro_batch=2,
        cache_dir=str(kit_cache),
        output_dir=str(tmp_path),
    )
    said = []
    for i in range(2):
        rows = sweep_threads(
            replace(args, output_dir=str(tmp_path / f"t{i}")), [1, 2], nproc_per_node=1, steps=3
        )
        assert all(len(r["samples"]) == 2 for r in rows)  # equal steady steps, the warm-up left out
        said.append(interpret.threads(rows, cores=os.cpu_count() or 2, nproc=1))
    winners = {line.split(" beats ")[0] for line in said if " beats " in line}
    assert len(winners) <= 1, said  # a clear verdict that flips between two runs was never clear
    # each sweep was one launch: both settings took turns inside the same ranks (one output folder each)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t0-threads", "t1-threads"]
