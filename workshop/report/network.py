"""Chapter 05's sentences on a multi-node run under bandwidth caps, computed from its table: the bytes on the
wire per step against the step, what start-up sent apart from the steps, and whether a tighter cap moved the
step, said only as far as one run per cap goes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workshop.lang import _
from workshop.plan import topology
from workshop.report import verdict


def bandwidth(
    rows: Sequence[Mapping[str, Any]], *, parse_rate=None, model_mb: float | None = None
) -> list[str]:
    """Chapter 05's sentences on a netsim table (one row per rate cap, fastest first): bytes each node sent
    per steady step / the cap, against the step time (s): network-bound or compute-bound; and what start-up
    sent apart from the steps (node 0 more than the others, and why). `model_mb`: the weights' size, MB."""
    parse_rate = parse_rate or topology.parse_rate
    ok = [r for r in rows if r.get("ok") and r.get("step_time_s_median")]
    if len(ok) < 2:
        return [_("fewer than two caps ran; nothing to compare")]
    out = [line for r in ok if (line := _wire_share(r, parse_rate(r["rate"])))]
    out += _startup(ok[0], model_mb)
    walls = [r["wall_s"] for r in ok if r.get("wall_s")]
    if len(walls) == len(ok):
        out.append(
            _(
                "wall time per cap (start-up included; DeepSpeed's ops and the tokenizer were built before "
                "the first one): {walls}"
            ).format(walls=", ".join(f"{r['rate']} {r['wall_s']:.0f} s" for r in ok))
        )
    return out + [_cap_effect(ok[0], ok[-1], parse_rate)]


def _wire_share(r: Mapping[str, Any], bits: float | None) -> str | None:
    """The least time one cap's steady step spends on the wire, as a share of the step; None: no bytes or
    no cap to say it from."""
    steady = [b for b in r.get("mb_per_step_per_node") or [] if b is not None]
    total = [b for b in r.get("mb_sent_per_node") or [] if b is not None]
    per_step = max(steady) if steady else (max(total) / r["steps"] if total and r.get("steps") else None)
    if not (per_step and bits):
        return None
    wire_s = per_step * 1e6 * 8 / bits
    return _(
        "{rate}: {mb:.0f} MB sent per node per step -> at least "
        "{wire:.2f} s on the wire of a {step:.2f} s step ({share:.0%})"
    ).format(
        rate=r["rate"],
        mb=per_step,
        wire=wire_s,
        step=r["step_time_s_median"],
        share=wire_s / r["step_time_s_median"],
    )


def _startup(first: Mapping[str, Any], model_mb: float | None) -> list[str]:
    """What start-up sent beyond the steady steps (node 0 more: the weights' broadcast, the store)."""
    start = [b for b in first.get("mb_startup_per_node") or [] if b is not None]
    steady0 = [b for b in first.get("mb_per_step_per_node") or [] if b is not None]
    if not (len(start) > 1 and len(steady0) == len(start)):
        return []
    extra = start[0] - max(start[1:])
    why = ""
    if model_mb and extra > 0:
        # the broadcast explains at most the weights' size; the rest is said as not attributed, not guessed
        other = extra - min(model_mb, extra)
        why = _(
            "; the model's weights are {model_mb:.0f} MB, which rank 0 broadcasts to every rank once as "
            "deepspeed.zero.Init partitions them: that explains {explained:.0f} MB of it"
        ).format(model_mb=model_mb, explained=min(model_mb, extra)) + (
            _(
                "; the other {other:.0f} MB is not measured apart here (node 0 also hosts the rendezvous "
                "store, and its first step's traffic is in this count)"
            ).format(other=other)
            if other > 0.1 * extra
            else ""
        )
    return [
        _(
            "start-up (rendezvous, initial weights, the first step): node 0 sent {first:.0f} MB, the "
            "others {others:.0f} MB, {extra:+.0f} MB for node 0{why}. The steps after it are even: "
            "{steady} MB per step per node."
        ).format(
            first=start[0],
            others=max(start[1:]),
            extra=extra,
            why=why,
            steady=" / ".join(f"{b:.0f}" for b in steady0),
        )
    ]


def _step_mb(r: Mapping[str, Any]) -> float | None:
    """The most MB one node's interface counted in a steady step at this cap (retransmissions included)."""
    steady = [b for b in r.get("mb_per_step_per_node") or [] if b is not None]
    return max(steady) if steady else None


def _wire_seconds(r: Mapping[str, Any], bits: float | None) -> float | None:
    """The least seconds one cap's steady step spends on the wire: its bytes per step per node / the cap."""
    mb = _step_mb(r)
    return mb * 1e6 * 8 / bits if (mb is not None and bits) else None


def _cap_effect(fast: Mapping[str, Any], slow: Mapping[str, Any], parse_rate=None) -> str:
    """Did the tighter cap slow the step? One run per cap, made one after the other, is one round: its steps
    give a spread but no verdict across runs (verdict.MIN_ROUNDS). What it can say is arithmetic: how much
    of the step's growth the extra wire time at the tighter cap (each cap's own byte count) accounts for."""
    grow = slow["step_time_s_median"] / fast["step_time_s_median"] - 1
    added = slow["step_time_s_median"] - fast["step_time_s_median"]
    parse_rate = parse_rate or topology.parse_rate
    w_fast, w_slow = (
        _wire_seconds(fast, parse_rate(fast["rate"])),
        _wire_seconds(slow, parse_rate(slow["rate"])),
    )
    wire = (
        (
            _(
                " On the wire, {slow_mb:.1f} MB per step at {slow} need {extra:.2f} s more than "
                "{fast_mb:.1f} MB at {fast}; the step grew {added:.2f} s."
            )
            if added >= 0
            else _(
                " On the wire, {slow_mb:.1f} MB per step at {slow} need {extra:.2f} s more than "
                "{fast_mb:.1f} MB at {fast}; the step shrank {added:.2f} s instead (one run per cap: noise, "
                "not the cap)."
            )
        ).format(
            extra=w_slow - w_fast,
            added=abs(added),
            fast=fast["rate"],
            slow=slow["rate"],
            fast_mb=_step_mb(fast),
            slow_mb=_step_mb(slow),
        )
        if w_fast is not None and w_slow is not None
        else ""
    )
    if fast.get("step_times_s") and slow.get("step_times_s"):
        v = verdict.compare(
            slow["step_times_s"],
            fast["step_times_s"],
            a_label=slow["rate"],
            b_label=fast["rate"],
            unit="s/step",
            higher_is_better=False,
            min_effect=0.10,
            rounds=1,  # one run per cap, one after the other
        )
        return _("step time {fast} -> {slow}: {said}.{wire}").format(
            fast=fast["rate"], slow=slow["rate"], said=v.sentence, wire=wire
        )
    if abs(grow) >= 0.10:  # one median per cap: no spread to judge by, so not read as the network's
        return _(
            "step time {fast} -> {slow}: {grow:+.0%}, from one median per cap with no spread to judge "
            "by: not a verdict on the network (several runs per cap would give one).{wire}"
        ).format(fast=fast["rate"], slow=slow["rate"], grow=grow, wire=wire)
    return _(
        "step time {fast} -> {slow}: {grow:+.0%}, one run per cap: the step is compute-bound here, the "
        'wire time a small share of it. A tighter cap (sim_rates = ["10gbit", "100mbit"]) or more bytes '
        "per step (a larger model, fp32) makes the network show.{wire}"
    ).format(fast=fast["rate"], slow=slow["rate"], grow=grow, wire=wire)
