"""The plan the learner picked in chapter 01 (its plan file), rendered in chapter 05 beside the lesson's job:
the one job to run next week, with the account's values chapter 05's parameters hold, validated here, with
the commands that create its Secret, check and submit it."""

from __future__ import annotations

from pathlib import Path

from workshop.k8s.render import render_plan
from workshop.k8s.site import Site
from workshop.k8s.trainjob import HFTokenSecret
from workshop.lang import _
from workshop.plan.job import load_plan
from workshop.report.predictions import plan_line


def render_picked(
    plan_file: str | Path, out_dir: str | Path, *, trainer: str | None = None, site: Site | None = None
) -> str:
    """Render chapter 01's plan file into `out_dir` with `site`'s registry, namespace, zone and storage
    (every document validated before any is written) and say what it is, which values are still the
    examples, and the steps before `kubectl apply`; without the file, say how to make it. A bad file is
    refused by load_plan, naming the field."""
    path = Path(plan_file)
    if not path.is_file():
        return _(
            "No plan file at {path}: run chapter 01 (it saves the row `plan_pick` there), or "
            "`python -m workshop plan --model llama-3-8b --tokens 1e8 --out {path}`, then this cell again."
        ).format(path=path)
    site = site or Site()
    plan = load_plan(path)
    written = render_plan(plan, out_dir, trainer=trainer, site=site)
    out = Path(out_dir)
    text = _(
        "Your plan from chapter 01 ({path}): {plan} Rendered and validated against the CRDs into {out}: "
        "{files}."
    ).format(path=path, plan=plan_line(plan), out=out, files=", ".join(p.name for p in written))
    examples = site.example_fields(plan.placement.storage)
    if examples:
        text += " " + _(
            "Still the examples' values, which cannot start in your account: {fields}; set chapter 05's "
            "parameters of those names and run this cell again (the preflight refuses them)."
        ).format(fields=", ".join(examples))
    steps = []
    if plan.job.weights == "hub":
        steps.append(
            _("create the Hugging Face token Secret once: `{command}`").format(
                command=HFTokenSecret(namespace=site.namespace).kubectl_command()
            )
        )
    steps.append(
        _("`python -m workshop cluster preflight --plan {path} --manifests {out}`").format(path=path, out=out)
    )
    steps.append(_("`kubectl apply -f {out}`").format(out=out))
    numbered = " ".join(f"({i}) {step}" for i, step in enumerate(steps, 1))
    return text + " " + _("Before you submit it, in this order: {steps}.").format(steps=numbered)
