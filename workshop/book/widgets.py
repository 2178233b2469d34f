"""Notebook widgets that still say something with no frontend (papermill, nbval, GitHub's viewer).

An ipywidgets output appears only where a live frontend renders it; a saved notebook keeps an empty box. Each
widget here also carries its current answer as text/plain, so a headless run records what a learner would
have seen at the default settings.
"""

from __future__ import annotations

from workshop.lang import _
from workshop.plan.memory import WorkshopError, recommend
from workshop.plan.models import PRESETS

GROUPS = {
    "Xeon 4th gen (c7i/m7i/r7i)": ["c7i", "m7i", "r7i"],
    "Xeon 6 (c8i/m8i/r8i)": ["c8i", "m8i", "r8i"],
    "GPU (p4d/p5/g6e)": ["p4d", "p5", "g6e"],
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
    price = f"${r.hourly_cost_usd:.2f}/h" if r.hourly_cost_usd is not None else "price unknown"
    note = ""
    if offload and r.device == "cpu":
        note = (
            "\nOffload moves optimizer state (and parameters) from GPU memory to host memory. On a CPU node "
            "everything is host memory already, so it saves nothing and adds CPU Adam's fp32 copy of the "
            "gradient partition (4 bytes per parameter / ranks) in place of one sub-group's step buffer: "
            "per-rank memory goes up, not down."
        )
    return (
        f"{r.nodes} x {r.instance_type}: cpu {r.cpu_request}, memory {r.memory_request}, shm {r.shm_size}, "
        f"{price}\n{r.reason}{note}"
    )


class _TextFallback:
    """Wraps an ipywidgets widget: the live widget in a frontend, its current answer as text elsewhere."""

    def __init__(self, widget, text: str):
        self.widget, self.text = widget, text

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.text
        return bundle


def planner_picker(model: str = "llama-3-8b", nodes: int = 4, source: str | None = None):
    """Model, node count, family group and offload -> the recommendation, live; text when headless."""
    import ipywidgets as w

    def show(model, nodes, group, offload):
        print(recommendation_text(model, nodes, group, offload, source))

    picker = w.interactive(
        show,
        model=w.Dropdown(options=list(PRESETS), value=model),
        nodes=w.IntSlider(value=nodes, min=1, max=16),
        group=list(GROUPS),
        offload=False,
    )
    first = next(iter(GROUPS))
    return _TextFallback(
        picker,
        _("[interactive in JupyterLab] {model}, {nodes} node(s), {group}, no offload:").format(
            model=model, nodes=nodes, group=first
        )
        + "\n"
        + recommendation_text(model, nodes, first, False, source),
    )


COST_GROUPS = {
    "CPU and GPU": None,
    "CPU only (c7i/m7i/r7i)": ("c7i", "m7i", "r7i"),
    "GPU only (p4d/p4de/p5/g6e/g5)": ("p4d", "p4de", "p5", "g6e", "g5"),
}


def cost_text(
    model: str, tokens: float, max_hours: float, group: str, source: str | None = None, top: int = 8
) -> str:
    """The cost planner's top plans for a token budget and deadline (0: none), as the widget prints them."""
    from workshop.plan import cost

    families = COST_GROUPS[group] or cost.DEFAULT_FAMILIES
    opts = cost.Options(
        model=model, tokens=tokens, families=families, max_hours=max_hours or None, source=source
    )
    try:
        plans = cost.rank(opts)
    except WorkshopError as exc:
        return str(exc)
    return cost.format_table(plans, top) + "\n" + f"1 {plans[0].label}: {plans[0].hint}"


def cost_picker(model: str = "llama-3-8b", tokens: float = 1e8, source: str | None = None):
    """Token budget, deadline and family group -> the ranked plans, live; text when headless."""
    import ipywidgets as w

    def show(tokens, max_hours, group):
        print(cost_text(model, tokens, max_hours, group, source))

    picker = w.interactive(
        show,
        tokens=w.FloatLogSlider(value=tokens, base=10, min=6, max=11, step=0.5, continuous_update=False),
        max_hours=w.FloatText(value=0.0, description="max hours (0: none)"),
        group=list(COST_GROUPS),
    )
    first = next(iter(COST_GROUPS))
    return _TextFallback(
        picker,
        _("[interactive in JupyterLab] {model}, {tokens} tokens, no deadline, {group}:").format(
            model=model, tokens=f"{tokens:.3g}", group=first
        )
        + "\n"
        + cost_text(model, tokens, 0.0, first, source),
    )
