"""What a job needs from the cluster and the account (`Requirements`), one verdict (`Check`) and all of them
(`Report`).

`requirements_from_plan` is the one way in: a plan as `workshop plan --json` writes it (`{"plans": [...]}`,
ranked, the first is taken), one plan of that list, or a plan object with the same attribute names (the cost
planner's `Plan`), plus what a plan does not say (where the outputs go, the Trainer release, the model)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError, check_choice
from workshop.k8s.storage import STORAGE_KINDS
from workshop.k8s.trainjob import TRAINER_VERSIONS, normalize_trainer_version
from workshop.lang import N_, _
from workshop.plan.models import PRESETS, resolve_source

DEVICES = ("cpu", "gpu")
PASS, FAIL, NOT_CHECKED, NOT_NEEDED = "pass", "fail", "not checked", "not needed"
VERDICTS = (PASS, FAIL, NOT_CHECKED, NOT_NEEDED)
# the verdicts as printed (marked here, translated where shown)
LABELS = {PASS: N_("pass"), FAIL: N_("FAIL"), NOT_CHECKED: N_("not checked"), NOT_NEEDED: N_("not needed")}
_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")  # family.size: c7i.48xlarge, p4d.24xlarge, u-6tb1.metal


@dataclass(frozen=True)
class Requirements:
    """What the job needs; None where nothing says (no plan: no quota to compare; the cluster is checked)."""

    instance_type: str | None = None
    nodes: int | None = None
    device: str | None = None  # "cpu" | "gpu"
    storage: str | None = None  # "fsx" | "s3" | None (outputs stay in the pods)
    trainer_version: str = TRAINER_VERSIONS[-1]
    model: str | None = None  # a hub id is checked for gated access; a preset needs no token
    zones: tuple[str, ...] = ()
    source: str = ""  # where the numbers came from, printed with the verdicts

    def describe(self) -> str:
        job = (
            _("{nodes} x {type} ({device}) from {source}").format(
                nodes=self.nodes, type=self.instance_type, device=self.device, source=self.source or "?"
            )
            if self.instance_type
            else _("no plan: the cluster is checked, not what a job needs from the account")
        )
        return _("{job}; Kubeflow Trainer {trainer}; outputs: {storage}; model: {model}").format(
            job=job,
            trainer=self.trainer_version,
            storage=self.storage or "-",
            model=self.model or "-",
        )


def _plan_value(plan, key: str):
    return plan.get(key) if isinstance(plan, Mapping) else getattr(plan, key, None)


def _what_it_says(plan) -> dict:
    """Storage, Trainer release and model, where the plan carries them: a Plan of plan/job.py (or its file:
    `trainer`, `placement.storage`, the job's model with its weights) or flat keys of the same names."""
    placement, job = _plan_value(plan, "placement"), _plan_value(plan, "job")
    if placement is None:
        return (
            {k: plan.get(k) for k in ("storage", "trainer_version", "model")}
            if isinstance(plan, Mapping)
            else {}
        )
    model = getattr(job, "train_model", None)
    if model is None and isinstance(job, Mapping) and job.get("model"):
        preset = PRESETS.get(job["model"])
        hub = preset.hub_id if preset else None
        model = hub if job.get("weights") == "hub" and hub else job["model"]
    return {
        "storage": _plan_value(placement, "storage"),
        "trainer_version": _plan_value(plan, "trainer"),
        "model": model,
    }


def requirements_from_plan(
    plan=None,
    *,
    storage: str | None = None,
    trainer_version: str | None = None,
    model: str | None = None,
    zones: tuple[str, ...] | list[str] = (),
    source: str | None = None,
) -> Requirements:
    """A Requirements from a plan (a `workshop plan --json` object, one plan of it, a Plan object of the cost
    planner, or a plan/job.py Plan and its file with `job` and `placement`) and what the plan does not say;
    every value is judged here, so a bad one is one error naming it."""
    where = source or "plan"
    shown = source or _("the plan")
    if isinstance(plan, Mapping) and "plans" in plan:
        plans = plan["plans"]
        if not isinstance(plans, list) or not plans or not isinstance(plans[0], Mapping):
            raise WorkshopError(f"{where}: 'plans' holds no plan (expected a non-empty list of objects)")
        shown = _("{where}, plan 1 of {n}").format(where=where, n=len(plans))
        where = f"{where}, plan 1 of {len(plans)}"
        plan = plans[0]
    instance_type = nodes = device = None
    if plan is not None:
        where_it_runs = (
            _plan_value(plan, "placement") or plan
        )  # a plan file of `workshop plan` (job, placement)
        instance_type, nodes, device = (
            _plan_value(where_it_runs, k) for k in ("instance_type", "nodes", "device")
        )
        if not isinstance(instance_type, str) or not _TYPE.match(instance_type):
            raise WorkshopError(
                f"{where}: instance_type {instance_type!r} is not an EC2 instance type such as c7i.48xlarge"
            )
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise WorkshopError(f"{where}: nodes {nodes!r} must be a whole number >= 1")
        check_choice(f"{where}: device", device, DEVICES)
        said = _what_it_says(plan)  # a flag wins over what the plan says
        storage = storage if storage is not None else said.get("storage")
        trainer_version = trainer_version if trainer_version is not None else said.get("trainer_version")
        model = model if model is not None else said.get("model")
    if storage is not None:
        check_choice("output storage", storage, STORAGE_KINDS)
    if model is not None:
        model = resolve_source(str(model)).name
    for zone in zones:
        if not isinstance(zone, str) or not re.fullmatch(r"[a-z]{2}(-gov)?-[a-z]+-\d[a-z]", zone):
            raise WorkshopError(f"availability zone {zone!r} is not a zone name such as us-east-1a")
    return Requirements(
        instance_type=instance_type,
        nodes=nodes,
        device=device,
        storage=storage,
        trainer_version=normalize_trainer_version(trainer_version or TRAINER_VERSIONS[-1]),
        model=model,
        zones=tuple(zones),
        source=shown if plan is not None else (source or ""),
    )


def read_plan_file(path: str | Path) -> dict:
    """A plan file's JSON object (`workshop plan --json > FILE`); a missing, unreadable or non-JSON file is
    one error naming it."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise WorkshopError(f"plan file {str(path)!r} does not exist or is not a file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkshopError(f"plan file {str(path)!r} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise WorkshopError(f"plan file {str(path)!r} holds {type(data).__name__}, expected one JSON object")
    return data


@dataclass(frozen=True)
class Check:
    """One verdict: what was checked, pass/fail/not checked/not needed, what was found, and for a failure
    what to do (a command or a page)."""

    name: str
    verdict: str
    detail: str
    fix: str = ""

    def __post_init__(self):
        check_choice("verdict", self.verdict, VERDICTS)
        if self.verdict == FAIL and not self.fix:
            raise WorkshopError(f"check {self.name!r} failed without saying what to do")


def _columns(text: str) -> int:
    """Terminal columns of a text: a Hangul syllable takes two, so Korean labels line up too."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


@dataclass
class Report:
    requirements: Requirements
    checks: list[Check] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == FAIL]

    @property
    def exit_code(self) -> int:
        """0 when nothing failed (checks that could not run do not fail it), 1 otherwise."""
        return 1 if self.failed else 0

    def verdict_of(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def lines(self) -> list[str]:
        width = max(_columns(_(label)) for label in LABELS.values())
        out = [_("preflight: {what}").format(what=self.requirements.describe())]
        for c in self.checks:
            label = _(LABELS[c.verdict])
            pad = " " * (width - _columns(label))
            out.append(f"  [{label}{pad}] {_(c.name)}: {c.detail}")
            if c.fix:
                out.append(" " * (width + 5) + "-> " + c.fix)
        out.append(
            _("{passed} passed, {failed} failed, {unchecked} not checked, {unneeded} not needed").format(
                passed=self.count(PASS),
                failed=self.count(FAIL),
                unchecked=self.count(NOT_CHECKED),
                unneeded=self.count(NOT_NEEDED),
            )
        )
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())
