"""One way to conclude from measurements, for every live comparison in the workbook.

A learner's machine is rarely idle (a browser, a neighbour's job on a shared VM), so a number measured once
can move by half between two runs. Every sentence that names a winner or a share is therefore computed here
from the samples themselves (per-step values with the warm-up left out, or interleaved rounds A B A B) and
states a result only when it is larger than the samples' own spread; otherwise it says the difference is
within the noise on this machine, and how large that noise was. A reference measured before and after (the
GEMM ceiling) shows how far it drifted; past `DRIFT_BOUND_PCT` a share is given as the range it can be, not
as one number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workshop.errors import WorkshopError
from workshop.lang import N_, _

# a reference that moves more than this while measured gives a range, not a share; the planner refuses a
# calibration past it (one rule, kept with the calibration's checks)
from workshop.plan.calibration import DRIFT_BOUND_PCT

MIN_EFFECT = 0.03  # a difference under 3% is never called a win, however quiet the machine
# Below this many samples each, separation alone is too easy to get by chance: unpaired, all of 3 A above all
# of 3 B happens 1 time in 10 with no real difference (2 of C(6, 3) orders); paired, every ratio on one side
# of 1 happens 2 / 2**n of the time (3 rounds: 1 in 4; 5 rounds: 1 in 16), so pairs need more rounds.
FEW_SAMPLES = 3
FEW_PAIRED_ROUNDS = 5
# A comparison names a winner only from at least this many interleaved rounds (A B A B): two runs made once,
# one after the other, differ by whatever the machine did in between, which the steps inside each run do not
# show (a ceiling probed around them moved 43% in one such round). Below it the sentence is "one round: no
# verdict", with the numbers.
MIN_ROUNDS = 2
VERDICT_WORDS = ("beats", "costs", "pays", "faster", "slower")  # what only a verdict may say


def _clean(name: str, xs: Sequence[float | None]) -> list[float]:
    out = [float(x) for x in xs if x is not None]
    if not out:
        raise WorkshopError(f"{name}: no samples to compare (every run failed or produced no steps)")
    if min(out) <= 0:
        raise WorkshopError(f"{name}: samples must be positive rates or times, got {min(out)}")
    return out


def spread_pct(xs: Sequence[float]) -> float:
    """(max - min) / median in percent: how far repeated measurements of one thing disagree."""
    med = statistics.median(xs)
    return 100 * (max(xs) - min(xs)) / med if med else 0.0


def steady(values: Sequence[float | None], warmup: int = 1) -> list[float]:
    """The samples after the warm-up (the first step compiles, allocates, faults pages in)."""
    xs = [float(v) for v in values if v is not None]
    return xs[warmup:] if len(xs) > warmup else xs


@dataclass(frozen=True)
class Comparison:
    """What `compare` concluded, with the numbers it concluded from (ratio is A over B, medians)."""

    sentence: str
    clear: bool  # a winner is named: the ranges do not overlap and the effect is >= MIN_EFFECT
    winner: str | None
    ratio: float
    low: float  # the ratio's range: min A / max B .. max A / min B (paired: min-max of the pairs)
    high: float
    spread_pct: float  # the larger of the two samples' spreads
    n_a: int
    n_b: int


def compare(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    a_label: str,
    b_label: str,
    unit: str = "tokens/s",
    higher_is_better: bool = True,
    paired: bool = False,
    min_effect: float = MIN_EFFECT,
    where: str | None = None,
    rounds: int | None = None,
) -> Comparison:
    """A against B from their samples: "A beats B by xR (range)" only when every A sample is on the same side
    of every B sample (paired: every round's ratio on the same side of 1) and the median effect is at least
    `min_effect`; otherwise "within noise on this machine", with the spread that hid the difference.

    One sample each has no spread to judge by, so it never names a winner. With fewer than FEW_SAMPLES each
    (two runs of two, or two paired rounds) samples of the same thing fail to overlap one time in three, so
    there the effect must also be more than twice the spread (in log terms); paired rounds need
    FEW_PAIRED_ROUNDS before agreement alone counts. `where`: the machine of a stored result. `rounds`: the
    interleaved rounds the samples come from (paired: one per sample); under MIN_ROUNDS, never a winner."""
    where = where or _("this machine")
    xa, xb = _clean(a_label, a), _clean(b_label, b)
    ratio, low, high, ratios = _ratios(xa, xb, paired)
    rounds = min(len(xa), len(xb)) if paired and rounds is None else rounds
    if rounds is not None and rounds < MIN_ROUNDS:
        return one_round(xa, xb, a_label=a_label, b_label=b_label, unit=unit)
    spread = max(spread_pct(xa), spread_pct(xb))
    noise = spread_pct(ratios) if paired else spread
    few = FEW_PAIRED_ROUNDS if paired else FEW_SAMPLES
    enough = min(len(xa), len(xb)) >= 2 and (
        min(len(xa), len(xb)) >= few or abs(math.log(ratio)) > 2 * noise / 100
    )
    up, down = low > 1 and ratio >= 1 + min_effect, high < 1 and ratio <= 1 - min_effect
    a_wins, b_wins = (up, down) if higher_is_better else (down, up)
    n = _("{na} and {nb} samples").format(na=len(xa), nb=len(xb))
    if enough and (a_wins or b_wins):
        win, lose = (a_label, b_label) if a_wins else (b_label, a_label)
        # the winner's advantage as a factor >= 1, with its range
        flip = (a_wins and not higher_is_better) or (b_wins and higher_is_better)
        f, lo, hi = (1 / ratio, 1 / high, 1 / low) if flip else (ratio, low, high)
        sentence = _(
            "{win} beats {lose} by x{f:.2f} ({lo:.2f}-{hi:.2f}) in {unit}: larger than the noise on {where} "
            "(spread {spread:.0f}%, {n})"
        ).format(win=win, lose=lose, f=f, lo=lo, hi=hi, unit=unit, where=where, spread=spread, n=n)
        return Comparison(sentence, True, win, ratio, low, high, spread, len(xa), len(xb))
    if min(len(xa), len(xb)) < 2:
        sentence = _(
            "{a} vs {b}: x{ratio:.2f} in {unit} from a single sample, which has no spread to judge by: not a "
            "verdict (run more steps or rounds)"
        ).format(a=a_label, b=b_label, ratio=ratio, unit=unit)
    else:
        sentence = _(
            "{a} vs {b}: within noise on {where} (x{ratio:.2f}, range {lo:.2f}-{hi:.2f} in {unit}; "
            "spread {spread:.0f}%, {n})"
        ).format(
            a=a_label, b=b_label, where=where, ratio=ratio, lo=low, hi=high, unit=unit, spread=spread, n=n
        )
    return Comparison(sentence, False, None, ratio, low, high, spread, len(xa), len(xb))


def one_round(
    a: Sequence[float | None],
    b: Sequence[float | None],
    *,
    a_label: str,
    b_label: str,
    unit: str = "tokens/s",
) -> Comparison:
    """A and B measured in one sequential round (A's run, then B's): the ratio of the medians with the
    range of the samples, and no winner; fewer than MIN_ROUNDS interleaved rounds never make a verdict."""
    xa, xb = _clean(a_label, a), _clean(b_label, b)
    ratio, low, high, _r = _ratios(xa, xb, False)
    spread = max(spread_pct(xa), spread_pct(xb))
    sentence = _(
        "{a} vs {b}: x{ratio:.2f} (range {lo:.2f}-{hi:.2f} in {unit}; {na} and {nb} samples), one round: no "
        "verdict (the machine can change between two runs made one after the other by more than that; "
        "{rounds} or more interleaved rounds give one)"
    ).format(
        a=a_label,
        b=b_label,
        ratio=ratio,
        lo=low,
        hi=high,
        unit=unit,
        na=len(xa),
        nb=len(xb),
        rounds=MIN_ROUNDS,
    )
    return Comparison(sentence, False, None, ratio, low, high, spread, len(xa), len(xb))


def _ratios(xa: list[float], xb: list[float], paired: bool) -> tuple[float, float, float, list[float]]:
    """A over B: the median ratio, its range, and (paired) every round's ratio."""
    if not paired:
        return statistics.median(xa) / statistics.median(xb), min(xa) / max(xb), max(xa) / min(xb), []
    if len(xa) != len(xb):
        raise WorkshopError(f"paired samples need as many A as B, got {len(xa)} and {len(xb)}")
    ratios = [x / y for x, y in zip(xa, xb)]
    return statistics.median(ratios), min(ratios), max(ratios), ratios


@dataclass(frozen=True)
class Share:
    """What `share` concluded: a part's rate as a percentage of a reference measured around it."""

    sentence: str
    clear: bool  # one number can be quoted: the reference stayed within DRIFT_BOUND_PCT and the share <= 100%
    pct: float  # median part over median reference
    low: float  # min part / max reference
    high: float  # max part / min reference
    drift_pct: float  # the reference's last sample against its first
    ref_range_pct: float  # (max - min) / min of the reference samples


def share(
    part: Sequence[float | None],
    reference: Sequence[float | None],
    *,
    part_label: str,
    reference_label: str,
    unit: str = "GFLOPS",
    drift_bound_pct: float = DRIFT_BOUND_PCT,
) -> Share:
    """`part` as a share of `reference` (samples in the order measured): one percentage when the reference
    held still, otherwise the range the share can be and how far the reference moved."""
    xp, xr = _clean(part_label, part), _clean(reference_label, reference)
    pct = 100 * statistics.median(xp) / statistics.median(xr)
    low, high = 100 * min(xp) / max(xr), 100 * max(xp) / min(xr)
    drift = 100 * (xr[-1] - xr[0]) / xr[0]
    moved = 100 * (max(xr) - min(xr)) / min(xr)
    still = moved <= drift_bound_pct
    moved_txt = _(
        "the {ref} moved from {first:.4g} to {last:.4g} {unit} ({drift:+.0f}%) while it was measured"
    ).format(ref=reference_label, first=xr[0], last=xr[-1], unit=unit, drift=drift)
    if not still:
        sentence = _(
            "{part} is between {lo:.0f}% and {hi:.0f}% of the {ref}: {moved}, more than the {bound:.0f}% "
            "this workbook trusts, so something else used these cores; no single share can be read from this "
            "run (re-run on an idle machine)"
        ).format(
            part=part_label, lo=low, hi=high, ref=reference_label, moved=moved_txt, bound=drift_bound_pct
        )
        return Share(sentence, False, pct, low, high, drift, moved)
    if low > 100 or pct > 100:
        sentence = _(
            "{part} is {lo:.0f}-{hi:.0f}% of the {ref}, a range that reaches above it, so no share of it "
            "is quoted: over 100% means the reference was measured low (the cores were shared or the clock "
            "dropped while it ran), not that the step beat its matmuls; {moved}"
        ).format(part=part_label, lo=low, hi=high, ref=reference_label, moved=moved_txt)
        return Share(sentence, False, pct, low, high, drift, moved)
    sentence = _("{part} is {pct:.0f}% ({lo:.0f}-{hi:.0f}%) of the {ref}; {moved}").format(
        part=part_label, pct=pct, lo=low, hi=high, ref=reference_label, moved=moved_txt
    )
    return Share(sentence, True, pct, low, high, drift, moved)


# ---------------------------------------------------------------- levers: a change against its base

ONE_ROUND = N_("one round: no verdict")


def verdict_word(v: Comparison, lever_label: str, rounds: int) -> str:
    """The table's word for a lever's comparison: "pays"/"costs" only for a winner, else why there is none."""
    if v.clear:
        return N_("pays") if v.winner == lever_label else N_("costs")
    return ONE_ROUND if rounds < MIN_ROUNDS else N_("within noise")


def lever_verdict(
    recs: Sequence[Mapping[str, Any]],
    base: Sequence[Mapping[str, Any]],
    labels: tuple[str, str] = ("lever", "base"),
    where: str | None = None,
) -> Comparison:
    """A lever against its base (each a list of runs: tokens_per_s, step_tokens_per_s): per round, paired
    (drift between rounds cancels); from one round, every step's ratio with no verdict (MIN_ROUNDS)."""
    if len(recs) >= MIN_ROUNDS and len(recs) == len(base):
        return compare(
            [r["tokens_per_s"] for r in recs],
            [r["tokens_per_s"] for r in base],
            a_label=labels[0],
            b_label=labels[1],
            paired=True,
            where=where,
        )
    return compare(
        [t for r in recs for t in r.get("step_tokens_per_s", [r["tokens_per_s"]])],
        [t for r in base for t in r.get("step_tokens_per_s", [r["tokens_per_s"]])],
        a_label=labels[0],
        b_label=labels[1],
        where=where,
        rounds=min(len(recs), len(base)),
    )


def rejudge(res: Mapping[str, Any], name: str, where: str | None = None) -> tuple[str, Comparison | None]:
    """A stored lever's verdict word and comparison by today's rule, from the runs it kept (never its stored
    word); (why not, None) where the result kept no runs of the lever or of its base."""
    lv = res["levers"][name]
    base = res["levers"].get(lv.get("base") or "")
    if not base or not lv.get("runs") or not base.get("runs"):
        return N_("cannot be re-judged (no samples stored)"), None
    own, other = lv["label"], base["label"]
    labels = (_(own), _(other))  # stored as the catalog's English (N_)
    v = lever_verdict(lv["runs"], base["runs"], labels, where)
    return verdict_word(v, labels[0], min(len(lv["runs"]), len(base["runs"]))), v
