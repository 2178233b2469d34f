"""The plan the learner picked in chapter 01 (its plan file), rendered in chapter 05 beside the lesson's job:
the one job to run next week, validated here, with the commands that check and submit it."""

from __future__ import annotations

from pathlib import Path

from workshop.k8s.render import render_plan
from workshop.lang import _
from workshop.plan.job import load_plan
from workshop.report.predictions import plan_line


def render_picked(plan_file: str | Path, out_dir: str | Path, *, trainer: str | None = None) -> str:
    """Render chapter 01's plan file into `out_dir` (every document validated before any is written) and say
    what it is; without the file, say how to make it. A bad file is refused by load_plan, naming the field."""
    path = Path(plan_file)
    if not path.is_file():
        return _(
            "No plan file at {path}: run chapter 01 (it saves the row `plan_pick` there), or "
            "`python -m workshop plan --model llama-3-8b --tokens 1e8 --out {path}`, then this cell again."
        ).format(path=path)
    plan = load_plan(path)
    written = render_plan(plan, out_dir, trainer=trainer)
    return _(
        "Your plan from chapter 01 ({path}): {plan} Rendered and validated against the CRDs into {out}: "
        "{files}. Before you submit it: `python -m workshop cluster preflight --plan {path}`; then "
        "`kubectl apply -f {out}`."
    ).format(path=path, plan=plan_line(plan), out=Path(out_dir), files=", ".join(p.name for p in written))
