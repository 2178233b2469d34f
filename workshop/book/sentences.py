"""Sentences the chapters' code cells print, kept here so they go through the catalog: a code cell is the
same bytes in the English and the Korean notebook, so what it prints in the learner's language must come from
the package (`_()`), never from a string literal in the cell."""

from __future__ import annotations

from collections.abc import Sequence

from workshop.lang import _
from workshop.plan import hardware, topology
from workshop.plan.catalog import PRICE_SOURCE
from workshop.plan.hardware import AMX_BF16_FLOP_PER_CYCLE


def amx_peak(name: str, cores: int, clock_ghz: float, peak_tflops: float, h100_tflops: float) -> str:
    """Chapter 01: an AMX socket's theoretical peak, and the original workshop's claim against it. Returns
    two lines of text (peak in TFLOPS, the claim as % of it, the H100's dense bf16 as a multiple of it)."""
    return (
        _("{name}: {cores} cores x {clock} GHz x {flop} = {peak:.0f} TFLOPS AMX peak").format(
            name=name, cores=cores, clock=clock_ghz, flop=AMX_BF16_FLOP_PER_CYCLE, peak=peak_tflops
        )
        + "\n"
        + _(
            "the original workshop's 30-50 TFLOPS = {low:.0f}-{high:.0f}% of it; "
            "H100 dense bf16 / AMX peak = {ratio:.1f}x"
        ).format(low=3000 / peak_tflops, high=5000 / peak_tflops, ratio=h100_tflops / peak_tflops)
    )


def plans_within(margin: float, usd: float, tokens: float) -> str:
    """Chapter 02: the heading of the plans within `margin` (a fraction, 0.1 = 10%) of the cheapest, which
    costs `usd` (US dollars) for `tokens` (a count)."""
    return _(
        "the first plan, and every plan within {margin:.0%} of the cheapest "
        "(${usd:,.0f} for {tokens:.3g} tokens):"
    ).format(margin=margin, usd=usd, tokens=tokens)


def validation(product: str, release: str, problems: Sequence[object]) -> str:
    """`Karpenter 1.8.8: valid: ...`, or the problems found."""
    verdict = problems or _("valid: every schema check and every evaluable CEL rule passes")
    return f"{product} {release}: {verdict}"


def offline_apply(docs: Sequence[dict], path: object) -> str:
    """Chapter 02: what a server-side apply of `docs` would do, and the kubectl command that does it (two
    lines)."""
    names = ", ".join(d["kind"] + "/" + d["metadata"]["name"] for d in docs)
    return (
        _("offline: would server-side apply {names}").format(names=names)
        + "\n"
        + _("same as: kubectl apply --server-side --field-manager=workshop -f {path}").format(path=path)
    )


def weights_match() -> str:
    """Chapter 03: the sentence for loaded weights that equal the file on every rank."""
    return _("weights equal the file everywhere; ZeRO-3 ranks hold 1/N of the elements each")


def plan_gap(gaps: Sequence[float]) -> str:
    """Chapter 03: the range of measured peak minus planned peak, per rank run (`gaps` in GB)."""
    return _(
        "measured peak - plan*: {low:+.2f} to {high:+.2f} GB over {n} rank runs "
        "(meta: compare plan* with 'used')"
    ).format(low=min(gaps), high=max(gaps), n=len(gaps))


def no_stored_result(command: str) -> str:
    """Chapter 04: no stored result yet, and the `command` that makes one."""
    return _("no stored result: run `{command}`").format(command=command)


def not_submitted(model_dir: str) -> str:
    """Chapter 05: the job was not submitted, and where (`model_dir`) it would have written its model."""
    return _("not submitted (submit=False or no cluster); the job would write its model to {path}").format(
        path=model_dir
    )


def self_rules(added: Sequence[object]) -> str:
    """Chapter 05: the self-referencing rules added to a security group (`added`), or that none were."""
    return _("added self-referencing rules: {rules}").format(rules=added or _("none needed"))


def no_netsim_result() -> str:
    """Chapter 06: no stored namespace result, and the two commands that make one."""
    return _(
        "no namespace result stored: run `python -m workshop netsim --json ...` then "
        "`python -m workshop comms netsim`"
    )


def cost_time_title(model: str, tokens: float) -> str:
    """Chapter 01: the cost figure's title, for `model` trained on `tokens` (a count)."""
    return _("{model}, {tokens:.3g} tokens: every plan that fits").format(model=model, tokens=tokens)


def loading_title(model: str, machine: str) -> str:
    """Chapter 03: the loading figure's two-line title: the model, then the machine it ran on."""
    return _("{model}: peak RSS while loading\n{machine}").format(model=model, machine=machine)


def loading_ratios(ratios: dict[str, Sequence[float]]) -> str:
    """Chapter 03: each method's peak over naive's (a ratio, 2 decimals), per rank, at N = 2."""
    rounded = {m: [round(x, 2) for x in v] for m, v in ratios.items()}
    return _("peak / naive peak at N=2, per rank:") + f" {rounded}"


def training_title(model: str, nproc: int, zero_stage: int, precision: str, machine: str) -> str:
    """Chapter 04: the training figure's title: model, ranks, ZeRO stage, precision and machine."""
    return _("{model}: {nproc}-rank ZeRO-{zero}, {precision}, {machine}").format(
        model=model, nproc=nproc, zero=zero_stage, precision=precision, machine=machine
    )


def peak_note(note: str | None) -> str:
    """Chapter 01: the summary's warning, or that every measured value is below its peak. Returns one line of
    text (`note` as given when there is one)."""
    return note or _("all measured values are below their peak")


def price_source() -> str:
    """Chapter 01: where the planner's instance prices (USD per hour, on demand) come from."""
    return _(PRICE_SOURCE)


def gemm_summary(d: dict, s: dict) -> str:
    """Chapter 01: bf16 against fp32 TFLOPS at one thread count, and bf16 as % of this CPU's bf16 peak and
    of the AMX peak of the same cores."""
    return _(
        "{cpu}, AMX={amx}, both at {threads} thread(s): bf16 {bf16:.3f} vs fp32 {fp32:.3f} TFLOPS "
        "(x{ratio}), {pct}% of this CPU's bf16 peak ({path}), {amx_pct}% of the AMX peak of the same cores; "
        "both peaks at {clock:g} GHz ({source})"
    ).format(
        clock=s["clock_ghz"] or hardware.XEON_REFERENCE["clock_ghz"],
        source=s["clock_source"] if s["clock_ghz"] else hardware.XEON_REFERENCE["clock_source"],
        cpu=d["cpu_model"],
        amx=d["amx"],
        threads=s["threads"],
        bf16=s["bf16_tflops"],
        fp32=s["fp32_tflops"],
        ratio=s["bf16_over_fp32"],
        pct=s["bf16_pct_of_peak"],
        path=s["peak_bf16_path"],
        amx_pct=s["bf16_pct_of_amx_peak"],
    )


def confounders() -> list[str]:
    """Chapter 06: what limits any model's claim on the original workshop's table. Returns the sentences
    (translated text), one per confounder."""
    return [_(c) for c in topology.CONFOUNDERS]
