"""Chapter 04's view of a ceiling result: load it, one row per lever, the markdown table and the figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NotRequired, TypedDict

from workshop.errors import (
    WorkshopError,
)
from workshop.experiments.ceiling.result import CeilingResult, LeverResult
from workshop.lang import N_, _
from workshop.paths import IMAGES_DIR, RESULTS_DIR
from workshop.report.interpret import ceiling_share, is_stored, measured_on
from workshop.report.plots import plot_ceiling
from workshop.report.verdict import rejudge
from workshop.tables import markdown_table

CEILING_JSON = RESULTS_DIR / "ceiling.json"


def load(path: str | Path = CEILING_JSON) -> CeilingResult:
    """A stored ceiling result (benchmarks/results/ceiling.json unless named): the record `run()` returns."""
    path = Path(path)
    if not path.is_file():
        raise WorkshopError(f"no ceiling result at {path}; run `python -m workshop bench ceiling` first")
    return json.loads(path.read_text())


class CeilingRow(TypedDict):
    """One lever as chapter 04's table shows it (`rows()`); skipped and failed levers have only their note."""

    lever: str
    label: str
    status: str
    ceiling_of: NotRequired[str | None]  # measured: "<precision> ceiling" when not the recipe's precision
    tokens_per_s: float | None
    pct_of_ceiling: float | None
    pct_range: tuple[float, float] | None
    mfu_pct: float | None
    effect: float | None
    effect_range: tuple[float, float] | None
    base: str | None
    verdict: str
    note: str | None
    share_clear: NotRequired[bool]  # measured: one % can be read (else only pct_range: the ceiling drifted)
    clear: NotRequired[bool]  # measured with a base: the verdict names a winner (else the effect is a range)


def rows(result: CeilingResult | None = None, path: str | Path = CEILING_JSON) -> list[CeilingRow]:
    """One row per lever: tokens/s, % of this machine's GEMM ceiling, MFU of the nominal peak, effect vs its
    base."""
    res = load(path) if result is None else result
    where = measured_on(res) if is_stored(res) else None
    rec = res["levers"].get("recipe")
    recipe_clear = bool(rec and rec["status"] == "measured" and ceiling_share(res).clear)
    out: list[CeilingRow] = []
    for name, lv in res["levers"].items():
        if lv["status"] != "measured":
            out.append(_unmeasured(name, lv))
            continue
        pct, eff, m = lv["pct_of_ceiling"], lv.get("effect_vs_base"), lv.get("mfu_pct_of_peak")
        # every step against every ceiling probe where the result has them (the whisker a drifting ceiling
        # widens); older results: min-max over the rounds
        sh = lv.get("share")
        lo, hi = (sh["low"], sh["high"]) if sh else (pct["min"], pct["max"])
        # a lever in another precision is measured against that precision's ceiling, not the recipe's
        other = lv.get("precision") and lv["precision"] != res.get("precision")
        # the verdict by today's rule from the runs it kept, never the word stored with them
        word, cmp = rejudge(res, name, where) if lv.get("base") else ("baseline", None)
        out.append(
            {
                "lever": name,
                "label": lv["label"],
                "status": "measured",
                "ceiling_of": _("{precision} ceiling").format(precision=lv["precision"]) if other else None,
                "tokens_per_s": round(lv["tokens_per_s"]["median"], 1),
                "pct_of_ceiling": round(pct["median"], 1),
                "pct_range": (round(min(lo, pct["median"]), 1), round(max(hi, pct["median"]), 1)),
                "mfu_pct": round(m["median"], 1) if m else None,
                "effect": round(eff["median"], 3) if eff else None,
                "effect_range": (
                    (round(cmp.low, 3), round(cmp.high, 3))
                    if cmp
                    else (round(eff["min"], 3), round(eff["max"], 3))
                )
                if eff
                else None,
                "base": lv.get("base"),
                "verdict": word,
                "note": lv["about"],
                "share_clear": bool(recipe_clear and (sh["clear"] if sh else True)),
                "clear": cmp.clear if cmp else True,
            }
        )
    return out


def _unmeasured(name: str, lv: LeverResult) -> CeilingRow:
    """A skipped or failed lever: its note only."""
    return {
        "lever": name,
        "label": lv["label"],
        "status": lv["status"],
        "tokens_per_s": None,
        "pct_of_ceiling": None,
        "pct_range": None,
        "mfu_pct": None,
        "effect": None,
        "effect_range": None,
        "base": lv.get("base"),
        "verdict": N_("skipped"),
        "note": lv.get("reason"),
    }


COLUMNS = (
    "lever",
    "tokens/s",
    "% of GEMM ceiling (min-max)",
    "MFU % of peak",
    "effect vs base (min-max)",
    "verdict",
)


def format_table(table: list[CeilingRow]) -> str:
    """Markdown for the notebook and the README: one line per lever (tokens/s, % of the GEMM ceiling, MFU %
    of the nominal peak, effect x against its base), as text."""
    lines: list[list[object]] = []
    for r in table:
        if r["status"] != "measured":
            label, note = r["label"], r["note"]
            lines.append(
                [_(label), "-", "-", "-", "-", _("skipped: {note}").format(note=_(note) if note else "")]
            )
            continue
        pct_range = r["pct_range"]
        assert pct_range is not None  # rows() gives every measured lever its range
        pct = (
            f"{r['pct_of_ceiling']} ({pct_range[0]}-{pct_range[1]})"
            if r.get("share_clear", True)
            else f"{pct_range[0]}-{pct_range[1]} (ceiling drifted: a range only)"
        )
        if r.get("ceiling_of"):
            pct += _(" of the {ceiling}").format(ceiling=r["ceiling_of"])
        eff_range = r["effect_range"]  # None exactly when effect is: a lever without a base
        eff = (
            "-"
            if eff_range is None
            else _("x{effect} ({low}-{high}) vs {base}").format(
                effect=r["effect"], low=eff_range[0], high=eff_range[1], base=r["base"]
            )
        )
        label, verdict = r["label"], r["verdict"]
        lines.append([_(label), r["tokens_per_s"], pct, r["mfu_pct"], eff, _(verdict)])
    return markdown_table(COLUMNS, lines)


def figure(result: CeilingResult | None = None, path: str | Path = IMAGES_DIR / "bench_ceiling.png") -> Path:
    """Chapter 04's figure of the measured levers (% of the GEMM ceiling, effect x vs base); returns the PNG's
    path."""
    res = load() if result is None else result
    rounds = res["config"].get("rounds", 1)
    # a stored result says so in its title, with the machine and date it was measured on
    stored = _("stored result, measured on {where}").format(where=measured_on(res)) + "\n"
    stored = stored if is_stored(res) else ""
    return plot_ceiling(
        [r for r in rows(res) if r["status"] == "measured"],
        path,
        effect_label=_("tokens/s vs its base (x, {rounds} paired rounds)").format(rounds=rounds)
        if rounds > 1
        else _("tokens/s vs its base (x, 1 round: no verdict;\nspan: the steps' range)"),
        title=stored
        + _(
            "{machine}, {isa}: step vs GEMM ceiling ({model}, {nproc} ranks, {rounds} round(s);\n"
            "whiskers and spans: min-max)"
        ).format(
            machine=res["machine"].get("gpu") or res["machine"]["cpu_model"],
            isa=res["isa_path"],
            model=res["config"]["model"],
            nproc=res["config"]["nproc"],
            rounds=rounds,
        ),
    )
