"""One validator for every manifest the workbook emits: the real CRD's schema AND its CEL rules, offline.

Why not just `kubectl apply --dry-run=server`? Because a learner may have no cluster yet, and a typo in a
NodePool should fail here, in seconds, with the field named — not an hour later as a Pending pod. A plain
JSON-schema check is not enough either: Karpenter and Kubeflow Trainer put much of their validation in CEL
rules (`x-kubernetes-validations`), e.g. "an `In` requirement needs values" or "role XOR instanceProfile".

The checks follow what the API server does for a custom resource, in its order:
1. kind/apiVersion must name a served CRD version (an unknown kind is an error, never a silent pass);
2. schema defaults are applied to a copy (CEL rules see defaulted objects, as on the server);
3. the openAPIV3Schema, with `jsonschema` (Draft 4: OpenAPI 3.0's boolean exclusiveMinimum) extended by the
   Kubernetes dialect: nullable, x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields,
   x-kubernetes-embedded-resource, list-map keys and sets, the formats the API server checks (int32, int64,
   date-time, duration, quantity, byte), and unknown fields rejected as `kubectl --validate=strict` does.
   ObjectMeta and the core kinds are small schemas (`core_schemas`), run by the same validator (`schema`);
4. CEL rules (`cel_rules`) with cel-python plus the Kubernetes extension functions in `cel_ext`. Transition
   rules (those reading `oldSelf`) compare against the stored object and are skipped — `rule_inventory()`
   says which rules run and which cannot, and why.

Which types? The file's plain scalars are typed as kubectl types them (Go's YAML, see `goyaml`): `- 2e-05`
among a TrainJob's args is a number there, and the server refuses it (`.spec.trainer.args[25]`); PyYAML
would have read a string and passed it.

What Trainer's admission webhook would refuse is judged too (`trainer_admission`): a TrainJob's runtimeRef
must name a ClusterTrainingRuntime its release ships, and its env must not set the names the runtime's
launcher reserves (`PET_*` for torch).

Which release? A manifest is judged against the release its shape targets: a field that only some known
releases declare (Trainer: `runtimePatches` means 2.2+, `podTemplateOverrides` means 2.1; Karpenter:
EC2NodeClass `networkInterfaces` means newer than 1.8) picks those releases; with no such clue it is judged
against every known release and the verdict says which accept it. `--trainer`/`--karpenter` force one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import yaml

from workshop.errors import WorkshopError, read_text
from workshop.k8s import crds
from workshop.k8s.base import load_yaml_docs
from workshop.k8s.cel_rules import cel_problems, rule_status
from workshop.k8s.core_schemas import CORE_SCHEMAS, OBJECT_META
from workshop.k8s.schema import Problem, join_path, short, structural, type_name
from workshop.k8s.trainer_admission import webhook_problems
from workshop.lang import _

DEFAULT_KARPENTER = crds.pinned_versions("karpenter")[-1]  # the newest pinned release
DEFAULT_TRAINER = "2.1.0"  # the original workshop's release (chapter 05 picks the form per trainer_version)
FAMILY_NAME = {"karpenter": "Karpenter", "trainer": "Trainer"}
FAMILIES = crds.FAMILIES


def known_releases(family: str) -> tuple[str, ...]:
    """The releases a manifest is judged against when no flag forces one: the pinned ones (shipped with the
    package) and any the learner added with `workshop crds fetch|import`."""
    return tuple(crds.versions(family))


KIND_FAMILY = {
    "NodePool": "karpenter",
    "NodeClaim": "karpenter",
    "EC2NodeClass": "karpenter",
    "TrainJob": "trainer",
    "TrainingRuntime": "trainer",
    "ClusterTrainingRuntime": "trainer",
    "Secret": "core",
    "StorageClass": "core",
    "PersistentVolumeClaim": "core",
}


# ------------------------------------------------------------------------------------------- CRDs
def available_versions(family: str) -> list[str]:
    """The known releases of a family: pinned (shipped) and added ones."""
    return crds.versions(family)


@dataclass(frozen=True)
class CRD:
    kind: str
    group: str
    versions: dict  # version name -> openAPIV3Schema (served versions only)
    scope: str
    source: str


@cache
def _load_folder(folder: str) -> dict[str, CRD]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        text = read_text(path, "CRD file", "a YAML file of CustomResourceDefinitions")
        try:  # an added (unpinned) release's files are whatever was imported: say which one is broken
            for doc in yaml.load_all(text, Loader=loader):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                versions = {
                    v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served")
                }
                crds[spec["names"]["kind"]] = CRD(
                    spec["names"]["kind"], spec["group"], versions, spec.get("scope", "Namespaced"), path.name
                )
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise WorkshopError(
                f"CRD file {str(path)!r} is not a valid CustomResourceDefinition manifest "
                f"({type(exc).__name__}: {exc}); import or fetch that release again"
            ) from None
    return crds


def load_crds(family: str, version: str) -> dict[str, CRD]:
    """Kind -> CRD for one release of a family; parsed once per process (the Trainer CRDs are ~1 MB)."""
    return _load_folder(str(crds.folder(family, version)))


@dataclass(frozen=True)
class RuleInfo:
    kind: str
    path: str  # schema path, "[*]" for every list item, "{*}" for every map value
    rule: str
    message: str
    status: str  # "evaluated" or "skipped: <why>"


def rule_inventory(*, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER) -> list[RuleInfo]:
    """Every CEL rule in the chosen CRD releases and whether this validator evaluates it."""
    out = []

    def walk(kind, schema, path):
        for rule in schema.get("x-kubernetes-validations") or []:
            out.append(
                RuleInfo(
                    kind,
                    path or "(root)",
                    rule["rule"],
                    rule.get("message", ""),
                    rule_status(rule["rule"]) or "evaluated",
                )
            )
        for key, sub in (schema.get("properties") or {}).items():
            walk(kind, sub, join_path(path, key))
        if isinstance(schema.get("items"), dict):
            walk(kind, schema["items"], path + "[*]")
        if isinstance(schema.get("additionalProperties"), dict):
            walk(kind, schema["additionalProperties"], path + "{*}")

    for family, version in (("karpenter", karpenter), ("trainer", trainer)):
        for kind, crd in load_crds(family, version).items():
            for schema in crd.versions.values():
                walk(kind, schema, "")
    return out


def rule_counts(*, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER) -> dict[str, dict]:
    """Per kind: how many CEL rules exist, how many are evaluated, how many skipped (kind -> {'rules',
    'evaluated', 'skipped'} counts)."""
    counts: dict[str, dict] = {}
    for info in rule_inventory(karpenter=karpenter, trainer=trainer):
        row = counts.setdefault(info.kind, {"rules": 0, "evaluated": 0, "skipped": 0})
        row["rules"] += 1
        row["evaluated" if info.status == "evaluated" else "skipped"] += 1
    return counts


# ------------------------------------------------------------------------------------ one document
def _label(doc, index: int, source: str | None) -> str:
    kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") or meta.get("generateName") or "?" if isinstance(meta, dict) else "?"
    where = f"document {index + 1}" + (f" of {source}" if source else "")
    return f"{kind}/{name} ({where})"


def _against(doc: dict, label: str, family: str, version: str) -> list[Problem]:
    """Problems of one document against one release of its family (the core family has no releases)."""
    if family == "core":
        return structural(copy.deepcopy(doc), CORE_SCHEMAS[doc["kind"]], label, "")
    release = f"{FAMILY_NAME[family]} {version}"
    kind = doc["kind"]
    crd = load_crds(family, version)[kind]
    served = {f"{crd.group}/{v}": v for v in crd.versions}
    if doc.get("apiVersion") not in served:
        return [
            Problem(
                label,
                "apiVersion",
                "served versions",
                f"{short(doc.get('apiVersion'))} is not served for {kind}; use {', '.join(served)}",
                release,
            )
        ]
    schema = crd.versions[served[doc["apiVersion"]]]
    schema = {
        **schema,
        "required": sorted({*schema.get("required", ()), "metadata"}),
        "properties": {**schema.get("properties", {}), "metadata": OBJECT_META},
    }
    obj = copy.deepcopy(doc)
    problems = structural(obj, schema, label, release)  # defaults obj in place, as the server does
    return problems + cel_problems(obj, schema, "", label, release, root=True)


@dataclass
class Verdict:
    """How one document fared: the releases judged, which accept it, and why those were chosen."""

    label: str
    family: str  # "karpenter", "trainer" or "core"
    judged: tuple[str, ...] = ()  # releases it was judged against ("" for core)
    accepted: tuple[str, ...] = ()
    reason: str = ""  # why these releases: "forced", "spec.runtimePatches: only in 2.3.0", ...
    problems: list[Problem] = field(default_factory=list)  # empty when any judged release accepts it

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        if self.family == "core":
            return f"{self.label}: {_('valid') if self.ok else _('invalid')}"
        name = FAMILY_NAME[self.family]
        rejected = [v for v in self.judged if v not in self.accepted]
        text = f"{self.label}: " + (
            _("accepted by {name} {releases}").format(name=name, releases=", ".join(self.accepted))
            if self.accepted
            else _("rejected by {name} {releases}").format(name=name, releases=", ".join(self.judged))
        )
        if self.accepted and rejected:
            text += _("; not by {releases}").format(releases=", ".join(rejected))
        return text + (f" ({self.reason})" if self.reason else "")


def _merge(per_release: dict[str, list[Problem]], family: str) -> list[Problem]:
    """One Problem per (path, rule, message), naming every release that reports it."""
    merged: dict[tuple, list[str]] = {}
    first: dict[tuple, Problem] = {}
    for version, problems in per_release.items():
        for p in problems:
            key = (p.doc, p.path, p.rule, p.message)
            merged.setdefault(key, []).append(version)
            first.setdefault(key, p)
    return [replace(p, release=f"{FAMILY_NAME[family]} {', '.join(merged[k])}") for k, p in first.items()]


def _shape_clue(per_release: dict[str, list[Problem]]) -> tuple[list[str], str]:
    """Releases whose schema declares every field the document uses, when that is some but not all of them
    (e.g. `spec.runtimePatches` exists from Trainer 2.2 on); else ([], "")."""
    unknown = {
        v: [p for p in ps if p.rule in ("unknown field", "served versions")] for v, ps in per_release.items()
    }
    fits = [v for v, ps in unknown.items() if not ps]
    if not fits or len(fits) == len(per_release):
        return [], ""
    misfit = next(ps[0] for ps in unknown.values() if ps)
    what = (
        f"{misfit.path} is not declared" if misfit.rule == "unknown field" else "its apiVersion is not served"
    )
    return (
        fits,
        (
            f"its shape targets {', '.join(fits)}: {what} in "
            f"{', '.join(v for v in per_release if v not in fits)}"
        ),
    )


def judge(
    doc,
    index: int = 0,
    source: str | None = None,
    *,
    karpenter: str | None = None,
    trainer: str | None = None,
) -> Verdict:
    """Judge one document against the release it targets (or the one forced), else every known release."""
    label = _label(doc, index, source)
    if not isinstance(doc, dict):
        return Verdict(
            label,
            "core",
            problems=[Problem(label, "", "type", f"a manifest must be a mapping, got {type_name(doc)}")],
        )
    kind = doc.get("kind")
    if kind not in KIND_FAMILY:
        return Verdict(
            label,
            "core",
            problems=[
                Problem(
                    label,
                    "kind",
                    "kind",
                    f"unknown kind {short(kind)}; this validator knows: {', '.join(KIND_FAMILY)}",
                )
            ],
        )
    family = KIND_FAMILY[kind]
    if family == "core":
        return Verdict(label, family, problems=_against(doc, label, family, ""))
    forced = karpenter if family == "karpenter" else trainer
    releases = [forced] if forced else list(known_releases(family))
    per_release = {v: _against(doc, label, family, v) + webhook_problems(doc, label, v) for v in releases}
    reason = "forced" if forced else ""
    if not forced:
        fits, why = _shape_clue(per_release)
        if fits:
            per_release, reason = {v: per_release[v] for v in fits}, why
    accepted = tuple(v for v, ps in per_release.items() if not ps)
    problems = [] if accepted else _merge(per_release, family)
    return Verdict(
        label, family, tuple(per_release), accepted, reason if reason != "forced" else "", problems
    )


# --------------------------------------------------------------------------------- entry points
def _check_versions(karpenter: str | None, trainer: str | None) -> None:
    """Fail early on an unknown release (named, with the known ones) before any schema is read, then on one
    whose files are unavailable, even with no documents of that family."""
    wanted = [
        (family, version)
        for family, forced in (("karpenter", karpenter), ("trainer", trainer))
        for version in ([forced] if forced else known_releases(family))
    ]
    for family, version in wanted:
        crds.release(family, version)
    for family, version in wanted:
        load_crds(family, version)


def judge_documents(
    docs: list, *, karpenter: str | None = None, trainer: str | None = None, source: str | None = None
) -> list[Verdict]:
    _check_versions(karpenter, trainer)
    return [judge(doc, i, source, karpenter=karpenter, trainer=trainer) for i, doc in enumerate(docs)]


def validate_documents(
    docs: list, *, karpenter: str | None = None, trainer: str | None = None, source: str | None = None
) -> list[Problem]:
    """All problems of all documents (empty list = valid). A version forces that release; None lets each
    document be judged against the release its shape targets, or every known release."""
    return [
        p
        for v in judge_documents(docs, karpenter=karpenter, trainer=trainer, source=source)
        for p in v.problems
    ]


def _load(text: str, source: str | None) -> tuple[list, list[Problem]]:
    try:
        docs = load_yaml_docs(text)
    except yaml.YAMLError as exc:
        return [], [Problem(source or "<yaml>", "", "YAML syntax", str(exc).replace("\n", " "))]
    if not docs:
        return [], [Problem(source or "<yaml>", "", "documents", "contains no documents")]
    return docs, []


def validate_yaml(
    text: str, *, karpenter: str | None = None, trainer: str | None = None, source: str | None = None
) -> list[Problem]:
    docs, problems = _load(text, source)
    return problems or validate_documents(docs, karpenter=karpenter, trainer=trainer, source=source)


def judge_files(paths, *, karpenter: str | None = None, trainer: str | None = None) -> list[Verdict]:
    verdicts = []
    for path in map(Path, paths):
        text = read_text(
            path, "manifest file", "a YAML manifest"
        )  # YAML itself is judged below, as a problem
        docs, problems = _load(text, str(path))
        if problems:
            verdicts.append(Verdict(str(path), "core", problems=problems))
        else:
            verdicts += judge_documents(docs, karpenter=karpenter, trainer=trainer, source=str(path))
    return verdicts


def validate_files(paths, *, karpenter: str | None = None, trainer: str | None = None) -> list[Problem]:
    return [p for v in judge_files(paths, karpenter=karpenter, trainer=trainer) for p in v.problems]


def ensure_valid(docs: list, *, karpenter: str | None = None, trainer: str | None = None) -> None:
    """Raise WorkshopError naming every problem; used before anything is written or applied."""
    problems = validate_documents(docs, karpenter=karpenter, trainer=trainer)
    if problems:
        raise WorkshopError(f"{len(problems)} problem(s) in the manifests:\n" + "\n".join(map(str, problems)))
