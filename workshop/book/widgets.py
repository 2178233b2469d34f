"""Notebook widgets that still say something with no frontend (papermill, nbval, GitHub's viewer).

An ipywidgets output appears only where a live frontend renders it; a saved notebook keeps an empty box. Each
widget here also carries its current answer as text/plain, so a headless run records what a learner would
have seen at the default settings. In a frontend every control is sized for its own text (in the learner's
language, so nothing is clipped), says "recomputing" while its answer is being worked out, and answers in the
widget's own words (the deadline box, not the command line's flag).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

from workshop.book.show import Text
from workshop.errors import WorkshopError
from workshop.lang import N_, _
from workshop.plan.fit import recommend
from workshop.plan.models import PRESETS

GROUPS = {
    N_("Xeon 4th gen (c7i/m7i/r7i)"): ["c7i", "m7i", "r7i"],
    N_("Xeon 6 (c8i/m8i/r8i)"): ["c8i", "m8i", "r8i"],
    N_("GPU (p4d/p5/g6e)"): ["p4d", "p5", "g6e"],
}


def recommendation_text(model: str, nodes: int, group: str, offload: bool, source: str | None = None) -> str:
    """Chapter 01's planner answer as the widget prints it (or its explanation when nothing fits)."""

    try:
        r = recommend(
            model,
            nodes=nodes,
            families=GROUPS[group],
            offload_optimizer=offload,
            offload_param=offload,
            source=source,
        )
    except WorkshopError as exc:
        return str(exc)
    price = f"${r.hourly_cost_usd:.2f}/h" if r.hourly_cost_usd is not None else _("price unknown")
    note = ""
    if offload and r.device == "cpu":
        note = "\n" + _(
            "Offload moves optimizer state (and parameters) from GPU memory to host memory. On a CPU node "
            "everything is host memory already, so it saves nothing and adds CPU Adam's fp32 copy of the "
            "gradient partition (4 bytes per parameter / ranks) in place of one sub-group's step buffer: "
            "per-rank memory goes up, not down."
        )
    return (
        f"{r.nodes} x {r.instance_type}: cpu {r.cpu_request}, memory {r.memory_request}, "
        f"shm {r.shm_size}, {price}\n{r.reason}{note}"
    )


class _TextFallback:
    """Wraps an ipywidgets widget: the live widget in a frontend, its current answer as text elsewhere."""

    def __init__(self, widget, text: str):
        self.widget, self.text = widget, text

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.text
        return bundle


def text_em(text: str) -> float:
    """About how wide `text` renders, in em of the widgets' sans-serif font: wide (Hangul, CJK) characters
    take a full em, the others at most 0.62 em (an upper bound for Latin letters, digits and punctuation)."""
    return sum(1.05 if unicodedata.east_asian_width(c) in "WF" else 0.62 for c in text)


def _label_style(description: str) -> dict[str, str]:
    return {"description_width": f"{text_em(description) + 0.5:.1f}em"}


def _dropdown(description: str, options: list[tuple[str, object]], value: object):
    """A dropdown wide enough for its label and its longest option (plus the arrow)."""
    import ipywidgets as w

    label_em = text_em(description) + 0.5
    widest = max(text_em(label) for label, _v in options)
    return w.Dropdown(
        options=options,
        value=value,
        description=description,
        style=_label_style(description),
        layout=w.Layout(width=f"{label_em + widest + 3.5:.1f}em"),
    )


def _sized(control, description: str, body_em: float):
    """Give `control` a label sized for `description` and `body_em` em for its input."""
    import ipywidgets as w

    control.description = description
    control.style.description_width = _label_style(description)["description_width"]
    control.layout = w.Layout(width=f"{text_em(description) + 0.5 + body_em:.1f}em")
    return control


def _live(controls: dict, answer: Callable[..., str]):
    """Controls, a busy line and an output: every change shows "recomputing", then the new answer.
    Returns the box and the first answer (the text a headless run records)."""
    import ipywidgets as w
    from IPython.display import display

    busy = w.HTML(value="", layout=w.Layout(min_height="1.6em"))
    out = w.Output()

    first: list[str] = []

    def redraw(_change=None):
        busy.value = "<i>" + _("recomputing...") + "</i>"
        for c in controls.values():
            c.disabled = True
        try:
            text = answer(**{k: c.value for k, c in controls.items()})
        finally:
            for c in controls.values():
                c.disabled = False
        out.clear_output(wait=True)
        with out:
            display(Text(text))
        busy.value = ""
        first.append(text)

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    box = w.VBox([w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap")), busy, out])
    box.add_class("workshop-live")
    return box, first[0]


def planner_picker(model: str = "llama-3-8b", nodes: int = 4, source: str | None = None):
    """Model, node count, family group and offload -> the recommendation, live; text when headless.
    Returns a display object for the cell to show (it prints nothing itself): the live widget in
    JupyterLab, the default choice's recommendation as text/plain elsewhere (nbval, papermill)."""
    import ipywidgets as w

    first = next(iter(GROUPS))
    controls = {
        "model": _dropdown(_("model"), [(m, m) for m in PRESETS], model),
        "nodes": _sized(w.IntSlider(value=nodes, min=1, max=16, continuous_update=False), _("nodes"), 16),
        "group": _dropdown(_("families"), [(_(g), g) for g in GROUPS], first),
        "offload": w.Checkbox(
            value=False,
            description=_("offload (ZeRO-Offload)"),
            indent=False,
            layout=w.Layout(width=f"{text_em(_('offload (ZeRO-Offload)')) + 3:.1f}em"),
        ),
    }
    picker, text = _live(
        controls,
        lambda model, nodes, group, offload: recommendation_text(model, nodes, group, offload, source),
    )
    return _TextFallback(
        picker,
        _("[interactive in JupyterLab] {model}, {nodes} node(s), {group}, no offload:").format(
            model=model, nodes=nodes, group=_(first)
        )
        + "\n"
        + text,
    )


COST_GROUPS = {
    N_("CPU and GPU"): None,
    N_("CPU only (c7i/m7i/r7i)"): ("c7i", "m7i", "r7i"),
    N_("GPU only (p4d/p4de/p5/g6e/g5)"): ("p4d", "p4de", "p5", "g6e", "g5"),
}


def cost_text(
    model: str, tokens: float, max_hours: float, group: str, source: str | None = None, top: int = 8
) -> str:
    """The cost planner's top plans for a token budget and deadline (0: none), as the widget prints them:
    when nothing meets the deadline, a sentence about the deadline box and the fastest plan instead."""
    from workshop.plan import cost
    from workshop.plan.options import DEFAULT_FAMILIES, Options

    families = COST_GROUPS[group] or DEFAULT_FAMILIES
    opts = Options(model=model, tokens=tokens, families=families, max_hours=max_hours or None, source=source)
    try:
        plans = cost.rank(opts)
    except WorkshopError as exc:
        if not max_hours:
            return str(exc)
        try:
            unbounded = cost.rank(Options(model=model, tokens=tokens, families=families, source=source))
        except WorkshopError:
            return str(exc)
        fastest = min(unbounded, key=lambda p: p.hours)
        return _(
            "No plan finishes {tokens} tokens within the deadline of {hours:g} hours: the fastest, {plan}, "
            "takes {fastest:.3g} hours. Raise the deadline (hours) or set it to 0 for no deadline."
        ).format(tokens=f"{tokens:.3g}", hours=max_hours, plan=fastest.label, fastest=fastest.hours)
    return cost.format_table(plans, top) + "\n" + f"1 {plans[0].label}: {plans[0].hint}"


def cost_picker(model: str = "llama-3-8b", tokens: float = 1e8, source: str | None = None):
    """Token budget, deadline and family group -> the ranked plans, live; text when headless.
    Returns a display object for the cell to show (it prints nothing itself): the live widget in
    JupyterLab, the default choice's ranked plans (cost_text) as text/plain elsewhere (nbval, papermill)."""
    import ipywidgets as w

    first = next(iter(COST_GROUPS))
    slider = w.FloatLogSlider(
        value=tokens, base=10, min=6, max=11, step=0.5, continuous_update=False, readout_format=".3g"
    )
    controls = {
        "tokens": _sized(slider, _("tokens"), 18),
        "max_hours": _sized(
            w.BoundedFloatText(value=0.0, min=0.0, max=1e6), _("deadline (hours, 0: none)"), 7
        ),
        "group": _dropdown(_("families"), [(_(g), g) for g in COST_GROUPS], first),
    }
    picker, text = _live(
        controls, lambda tokens, max_hours, group: cost_text(model, tokens, max_hours, group, source)
    )
    return _TextFallback(
        picker,
        _("[interactive in JupyterLab] {model}, {tokens} tokens, no deadline, {group}:").format(
            model=model, tokens=f"{tokens:.3g}", group=_(first)
        )
        + "\n"
        + text,
    )
