"""One validator for every manifest the workbook emits: the real CRD's schema AND its CEL rules, offline.

Why not just `kubectl apply --dry-run=server`? Because a learner may have no cluster yet, and a typo in a
NodePool should fail here, in seconds, with the field named — not an hour later as a Pending pod. A plain
JSON-schema check is not enough either: Karpenter and Kubeflow Trainer put much of their validation in CEL
rules (`x-kubernetes-validations`), e.g. "an `In` requirement needs values" or "role XOR instanceProfile".

The checks follow what the API server does for a custom resource, in its order:
1. kind/apiVersion must name a served CRD version (an unknown kind is an error, never a silent pass);
2. ObjectMeta is checked by hand (the CRD schema only says `metadata: object`);
3. schema defaults are applied to a copy (CEL rules see defaulted objects, as on the server);
4. openAPIV3Schema: types, nullable, enum, pattern, formats (int32/int64/date-time/duration/quantity/byte),
   length/item/property bounds, required, int-or-string, list-map key and set uniqueness, and unknown
   fields rejected as `kubectl --validate=strict` does;
5. CEL rules with cel-python plus the Kubernetes extension functions in `cel_ext`. Transition rules
   (those reading `oldSelf`) compare against the stored object and are skipped — `rule_inventory()` says
   which rules run and which cannot, and why.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import difflib
import json
import re
import sys
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import celpy
import celpy.celtypes as ct
import yaml

from workshop.errors import WorkshopError, check_choice, report
from workshop.k8s import cel_ext, crds
from workshop.k8s.base import load_yaml_docs

DEFAULT_KARPENTER = "1.8.8"
DEFAULT_TRAINER = "2.1.0"

# family -> folder name pattern under the CRDs directory
FAMILIES = {"karpenter": "karpenter-aws-v{}", "trainer": "kubeflow-trainer-v{}"}
KIND_FAMILY = {
    "NodePool": "karpenter", "NodeClaim": "karpenter", "EC2NodeClass": "karpenter",
    "TrainJob": "trainer", "TrainingRuntime": "trainer", "ClusterTrainingRuntime": "trainer",
    "Secret": "core",
}


@dataclass(frozen=True)
class Problem:
    doc: str      # "NodePool/cpu-amx (document 1)"
    path: str     # "spec.template.spec.requirements[0].values"
    rule: str     # schema keyword ("type", "enum", "unknown field", ...) or the CEL rule text
    message: str

    def __str__(self) -> str:
        return f"{self.doc}: {self.path or '(root)'}: {self.message} [rule: {self.rule}]"


# ------------------------------------------------------------------------------------------- CRDs
def crds_dir() -> Path:
    """Where CRDs are read: `$WORKSHOP_CRDS_DIR`, else the user cache that `workshop crds` fills."""
    return crds.root()


def available_versions(family: str) -> list[str]:
    """The pinned releases of a family (workshop.k8s.crds.RELEASES), whether cached yet or not."""
    check_choice("CRD family", family, FAMILIES)
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
        for doc in yaml.load_all(path.read_text(), Loader=loader):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            versions = {v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served")}
            crds[spec["names"]["kind"]] = CRD(spec["names"]["kind"], spec["group"], versions,
                                              spec.get("scope", "Namespaced"), path.name)
    return crds


def load_crds(family: str, version: str) -> dict[str, CRD]:
    """Kind -> CRD for one release of a family; parsed once per process (the Trainer CRDs are ~1 MB)."""
    check_choice(f"{family} version", version, available_versions(family))
    return _load_folder(str(crds.folder(family, version)))


# ---------------------------------------------------------------------------------------- helpers
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_TYPE_OK = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)
    or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DURATION = re.compile(r"^[-+]?(0|(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _format_error(fmt: str, value) -> str | None:
    if fmt == "int32" and isinstance(value, int) and not -2**31 <= value < 2**31:
        return "is out of the int32 range"
    if fmt == "int64" and isinstance(value, int) and not -2**63 <= value < 2**63:
        return "is out of the int64 range"
    if not isinstance(value, str):
        return None
    if fmt == "date-time" and not _RFC3339.match(value):
        return "is not an RFC 3339 date-time (e.g. 2025-01-31T12:00:00Z)"
    if fmt == "date" and not re.match(r"^\d{4}-\d{2}-\d{2}$", value):
        return "is not a date (YYYY-MM-DD)"
    if fmt == "duration" and not _DURATION.match(value):
        return "is not a duration (e.g. 30s, 20m, 720h)"
    if fmt == "quantity":
        try:
            cel_ext.parse_quantity(value)
        except ValueError:
            return "is not a quantity (e.g. 500m, 64Gi, 2)"
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return "is not base64"
    return None


def _qualified_name_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"name part {name!r} must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


# ---------------------------------------------------------------------------------- the checker
class _Checker:
    def __init__(self, doc_label: str):
        self.doc = doc_label
        self.problems: list[Problem] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.problems.append(Problem(self.doc, path, rule, message))

    # -- defaults (as the API server applies them before validating)
    def default(self, value, schema) -> None:
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            for key, sub in props.items():
                if key not in value and "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
            for key, item in value.items():
                if key in props:
                    self.default(item, props[key])
                elif isinstance(schema.get("additionalProperties"), dict):
                    self.default(item, schema["additionalProperties"])
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for item in value:
                self.default(item, schema["items"])

    # -- openAPIV3Schema
    def schema(self, value, schema: dict, path: str) -> None:
        if value is None:
            if not schema.get("nullable"):
                self.add(path, "nullable", "is null, but the field is not nullable (omit it instead)")
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not (isinstance(value, (int, str)) and not isinstance(value, bool)):
                self.add(path, "x-kubernetes-int-or-string",
                         f"must be an integer or a string, got {_type_name(value)} {_short(value)}")
                return
        else:
            want = schema.get("type")
            if want and not _TYPE_OK[want](value):
                self.add(path, "type", f"must be of type {want}, got {_type_name(value)} {_short(value)}")
                return
        self._scalar(value, schema, path)
        if isinstance(value, dict):
            self._object(value, schema, path)
        elif isinstance(value, list):
            self._array(value, schema, path)
        for sub in schema.get("allOf") or []:
            self.schema(value, {k: v for k, v in sub.items() if k != "type"}, path)
        anyof = schema.get("anyOf") if not schema.get("x-kubernetes-int-or-string") else None
        if anyof and all(self._trial(value, sub, path) for sub in anyof):
            self.add(path, "anyOf", "matches none of the allowed alternatives")
        oneof = schema.get("oneOf")
        if oneof and sum(not self._trial(value, sub, path) for sub in oneof) != 1:
            self.add(path, "oneOf", "must match exactly one of the alternatives")
        if isinstance(schema.get("not"), dict) and not self._trial(value, schema["not"], path):
            self.add(path, "not", "matches a forbidden form")

    def _trial(self, value, schema, path) -> list[Problem]:
        trial = _Checker(self.doc)
        trial.schema(value, schema, path)
        return trial.problems

    def _scalar(self, value, schema, path) -> None:
        if "enum" in schema and value not in schema["enum"]:
            self.add(path, "enum", f"unsupported value {_short(value)}; allowed: "
                     + ", ".join(json.dumps(e) for e in schema["enum"]))
        if isinstance(value, str):
            if "pattern" in schema and not re.search(schema["pattern"], value):
                self.add(path, "pattern", f"{_short(value)} does not match {schema['pattern']}")
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                self.add(path, "maxLength", f"is {len(value)} characters long; at most {schema['maxLength']}")
            if "minLength" in schema and len(value) < schema["minLength"]:
                self.add(path, "minLength", f"is {len(value)} characters long; at least {schema['minLength']}")
        if "format" in schema:
            err = _format_error(schema["format"], value)
            if err:
                self.add(path, f"format: {schema['format']}", f"{_short(value)} {err}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and (value < schema["minimum"] or
                                        schema.get("exclusiveMinimum") and value == schema["minimum"]):
                self.add(path, "minimum", f"{value} is below the minimum {schema['minimum']}")
            if "maximum" in schema and (value > schema["maximum"] or
                                        schema.get("exclusiveMaximum") and value == schema["maximum"]):
                self.add(path, "maximum", f"{value} is above the maximum {schema['maximum']}")

    def _object(self, value: dict, schema: dict, path: str) -> None:
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        open_ = (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")
                 or ("properties" not in schema and extra is None))
        for key in schema.get("required") or []:
            if key not in value:
                self.add(_join(path, key), "required", "is required")
        for key, item in value.items():
            sub = _join(path, key)
            if key in props:
                self.schema(item, props[key], sub)
            elif isinstance(extra, dict):
                self.schema(item, extra, sub)
            elif schema.get("x-kubernetes-embedded-resource") and key in ("apiVersion", "kind", "metadata"):
                continue
            elif not open_:
                hint = difflib.get_close_matches(key, list(props), n=1)
                self.add(sub, "unknown field", f'unknown field "{key}"'
                         + (f' (did you mean "{hint[0]}"?)' if hint else "")
                         + (f"; known: {', '.join(props)}" if props and not hint else ""))
        n = len(value)
        if "maxProperties" in schema and n > schema["maxProperties"]:
            self.add(path, "maxProperties", f"has {n} entries; at most {schema['maxProperties']}")
        if "minProperties" in schema and n < schema["minProperties"]:
            self.add(path, "minProperties", f"has {n} entries; at least {schema['minProperties']}")

    def _array(self, value: list, schema: dict, path: str) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.add(path, "maxItems", f"has {len(value)} items; at most {schema['maxItems']}")
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.add(path, "minItems", f"has {len(value)} items; at least {schema['minItems']}")
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                self.schema(item, items, _join(path, i))
        kind = schema.get("x-kubernetes-list-type")
        if kind == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen: dict = {}
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    continue
                ident = tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
                if ident in seen:
                    self.add(_join(path, i), "x-kubernetes-list-map-keys",
                             f"duplicate entry for key ({', '.join(f'{k}={item.get(k)!r}' for k in keys)}); "
                             f"first at [{seen[ident]}]")
                seen.setdefault(ident, i)
        elif kind == "set" or schema.get("uniqueItems"):
            seen_items: dict = {}
            for i, item in enumerate(value):
                ident = json.dumps(item, sort_keys=True)
                if ident in seen_items:
                    self.add(_join(path, i), "x-kubernetes-list-type: set",
                             f"duplicate value {_short(item)}; first at [{seen_items[ident]}]")
                seen_items.setdefault(ident, i)

    # -- CEL
    def cel(self, value, schema: dict, path: str, *, root: bool = False) -> None:
        if value is None:
            return
        want = schema.get("type")
        if want and not schema.get("x-kubernetes-int-or-string") and not _TYPE_OK[want](value):
            return  # already reported by the schema pass; a rule on a mistyped value would only add noise
        for rule in schema.get("x-kubernetes-validations") or []:
            status = rule_status(rule["rule"])
            if status is not None:
                continue  # skipped: transition rule or a function we do not provide (see rule_inventory)
            self_value = value
            if root:  # at the root, Kubernetes exposes only metadata.name and metadata.generateName
                meta = value.get("metadata") or {}
                self_value = {**value, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}
            ok, err = _run_rule(rule["rule"], self_value)
            if not ok:
                message = rule.get("message") or f"failed rule: {rule['rule']}"
                if err:
                    message = f"{message} (the rule could not be evaluated: {err}; the API server rejects that too)"
                self.add(_join(path, rule["fieldPath"].lstrip(".")) if rule.get("fieldPath") else path,
                         rule["rule"], message)
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            extra = schema.get("additionalProperties")
            for key, item in value.items():
                if root and key == "metadata":
                    continue
                if key in props:
                    self.cel(item, props[key], _join(path, key))
                elif isinstance(extra, dict):
                    self.cel(item, extra, _join(path, key))
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self.cel(item, schema["items"], _join(path, i))

    # -- ObjectMeta (the CRD schema only says `type: object`; the API server checks it by hand too)
    _META_FIELDS: typing.ClassVar[set] = {"name", "generateName", "namespace", "labels", "annotations", "finalizers",
                    "ownerReferences", "uid", "resourceVersion", "generation", "creationTimestamp",
                    "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}

    def metadata(self, meta) -> None:
        if meta is None:
            self.add("metadata", "required", "is required (at least metadata.name)")
            return
        if not isinstance(meta, dict):
            self.add("metadata", "type", f"must be of type object, got {_type_name(meta)}")
            return
        for key in meta:
            if key not in self._META_FIELDS:
                self.add(_join("metadata", key), "unknown field", f'unknown field "{key}" in ObjectMeta')
        name = meta.get("name")
        if name is None and not meta.get("generateName"):
            self.add("metadata.name", "required", "is required")
        elif name is not None and (not isinstance(name, str) or len(name) > 253
                                   or not _DNS1123_SUBDOMAIN.match(name)):
            self.add("metadata.name", "DNS-1123 subdomain",
                     f"{_short(name)} must be lowercase alphanumerics, '-' or '.', at most 253 characters")
        ns = meta.get("namespace")
        if ns is not None and (not isinstance(ns, str) or len(ns) > 63 or not _DNS1123_LABEL.match(ns)):
            self.add("metadata.namespace", "DNS-1123 label", f"{_short(ns)} is not a valid namespace name")
        for field in ("labels", "annotations"):
            entries = meta.get(field)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                self.add(f"metadata.{field}", "type", f"must be a map of strings, got {_type_name(entries)}")
                continue
            for key, val in entries.items():
                p = _join(f"metadata.{field}", str(key))
                err = _qualified_name_error(str(key))
                if err:
                    self.add(p, "qualified name", f"key {err}")
                if not isinstance(val, str):
                    self.add(p, "type", f"must be a string, got {_type_name(val)} {_short(val)} (quote it)")
                elif field == "labels" and (len(val) > 63 or not _LABEL_VALUE.match(val)):
                    self.add(p, "label value", f"{_short(val)} must be at most 63 alphanumerics, '-', '_', '.'")


# ------------------------------------------------------------------------------------------ CEL
_ENV = celpy.Environment()
_BUILTINS = set(celpy.evaluation.base_functions) | {"has", "all", "exists", "exists_one", "filter", "map", "dyn"}
_FUNCTIONS = {"dyn": lambda x: x, **cel_ext.FUNCTIONS}
_STRINGS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


@cache
def rule_status(rule: str) -> str | None:
    """None when the validator evaluates `rule`; otherwise the reason it is skipped."""
    code = _STRINGS.sub("''", rule)
    if re.search(r"\boldSelf\b", code):
        return "skipped: " + cel_ext.UNSUPPORTED["oldSelf"]
    if "?." in code or "?[" in code:
        return "skipped: " + cel_ext.UNSUPPORTED["optional"]
    for name in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", code):
        if name in cel_ext.UNSUPPORTED:
            return f"skipped: {cel_ext.UNSUPPORTED[name]}"
        if name not in _BUILTINS and name not in _FUNCTIONS:
            return f"skipped: function {name}() is not available in cel-python or workshop.k8s.cel_ext"
    for name in re.findall(r"\b(sets|optional)\.", code):
        return f"skipped: {cel_ext.UNSUPPORTED[name]}"
    try:
        _program(rule)
    except Exception as exc:  # noqa: BLE001 - report the parser's words, whatever they are
        return f"skipped: cel-python cannot parse it ({type(exc).__name__})"
    return None


@cache
def _program(rule: str):
    return _ENV.program(_ENV.compile(rule), functions=_FUNCTIONS)


def _run_rule(rule: str, value) -> tuple[bool, str | None]:
    try:
        result = _program(rule).evaluate({"self": celpy.json_to_cel(value)})
    except Exception as exc:  # noqa: BLE001 - CEL runtime errors (no such key, bad int()) fail the rule
        return False, str(exc.args[0] if exc.args else exc)[:120]
    if isinstance(result, celpy.CELEvalError):
        return False, str(result.args[0] if result.args else result)[:120]
    return bool(result) if isinstance(result, ct.BoolType) else False, None


@dataclass(frozen=True)
class RuleInfo:
    kind: str
    path: str      # schema path, "[*]" for every list item, "{*}" for every map value
    rule: str
    message: str
    status: str    # "evaluated" or "skipped: <why>"


def rule_inventory(*, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER) -> list[RuleInfo]:
    """Every CEL rule in the chosen CRD releases and whether this validator evaluates it."""
    out = []

    def walk(kind, schema, path):
        for rule in schema.get("x-kubernetes-validations") or []:
            out.append(RuleInfo(kind, path or "(root)", rule["rule"], rule.get("message", ""),
                                rule_status(rule["rule"]) or "evaluated"))
        for key, sub in (schema.get("properties") or {}).items():
            walk(kind, sub, _join(path, key))
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
    """Per kind: how many CEL rules exist, how many are evaluated, how many skipped."""
    counts: dict[str, dict] = {}
    for info in rule_inventory(karpenter=karpenter, trainer=trainer):
        row = counts.setdefault(info.kind, {"rules": 0, "evaluated": 0, "skipped": 0})
        row["rules"] += 1
        row["evaluated" if info.status == "evaluated" else "skipped"] += 1
    return counts


# --------------------------------------------------------------------------------- entry points
def _check_secret(doc: dict, chk: _Checker) -> None:
    """Core Secret: a small hand-written schema (no CRD exists for core kinds)."""
    if doc.get("apiVersion") != "v1":
        chk.add("apiVersion", "enum", f"{_short(doc.get('apiVersion'))} is not served for Secret; use \"v1\"")
    allowed = {"apiVersion", "kind", "metadata", "data", "stringData", "type", "immutable"}
    for key in doc:
        if key not in allowed:
            chk.add(key, "unknown field", f'unknown field "{key}"; known: {", ".join(sorted(allowed))}')
    chk.metadata(doc.get("metadata"))
    for field in ("data", "stringData"):
        entries = doc.get(field)
        if entries is None:
            continue
        if not isinstance(entries, dict):
            chk.add(field, "type", f"must be a map of strings, got {_type_name(entries)}")
            continue
        for key, val in entries.items():
            p = _join(field, str(key))
            if not re.match(r"^[-._a-zA-Z0-9]+$", str(key)):
                chk.add(p, "pattern", "key must consist of alphanumerics, '-', '_' or '.'")
            if not isinstance(val, str):
                chk.add(p, "type", f"must be a string, got {_type_name(val)}")
            elif field == "data" and _format_error("byte", val):
                chk.add(p, "format: byte", "data values must be base64 (use stringData for plain text)")
    if "type" in doc and not isinstance(doc["type"], str):
        chk.add("type", "type", "must be a string")
    if "immutable" in doc and not isinstance(doc["immutable"], bool):
        chk.add("immutable", "type", "must be a boolean")


def _label(doc, index: int, source: str | None) -> str:
    kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") or meta.get("generateName") or "?" if isinstance(meta, dict) else "?"
    where = f"document {index + 1}" + (f" of {source}" if source else "")
    return f"{kind}/{name} ({where})"


def _validate_one(doc, index: int, source: str | None, karpenter: str, trainer: str) -> list[Problem]:
    chk = _Checker(_label(doc, index, source))
    if not isinstance(doc, dict):
        chk.add("", "type", f"a manifest must be a mapping, got {_type_name(doc)}")
        return chk.problems
    kind = doc.get("kind")
    if kind not in KIND_FAMILY:
        chk.add("kind", "kind", f"unknown kind {_short(kind)}; this validator knows: {', '.join(KIND_FAMILY)}")
        return chk.problems
    family = KIND_FAMILY[kind]
    if family == "core":
        _check_secret(doc, chk)
        return chk.problems
    crd = load_crds(family, karpenter if family == "karpenter" else trainer)[kind]
    served = {f"{crd.group}/{v}": v for v in crd.versions}
    if doc.get("apiVersion") not in served:
        chk.add("apiVersion", "served versions",
                f"{_short(doc.get('apiVersion'))} is not served for {kind}; use {', '.join(served)}")
        return chk.problems
    schema = crd.versions[served[doc["apiVersion"]]]
    chk.metadata(doc.get("metadata"))
    obj = copy.deepcopy(doc)
    chk.default(obj, schema)
    body = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
    chk.schema({k: v for k, v in obj.items() if k != "metadata"}, {**schema, "properties": body}, "")
    chk.cel(obj, schema, "", root=True)
    return chk.problems


def validate_documents(docs: list, *, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER,
                       source: str | None = None) -> list[Problem]:
    """All problems of all documents (empty list = valid). Versions pick the CRD release folders."""
    load_crds("karpenter", karpenter)  # fail early on an unknown version, even with no such documents
    load_crds("trainer", trainer)
    problems = []
    for i, doc in enumerate(docs):
        problems.extend(_validate_one(doc, i, source, karpenter, trainer))
    return problems


def validate_yaml(text: str, *, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER,
                  source: str | None = None) -> list[Problem]:
    try:
        docs = load_yaml_docs(text)
    except yaml.YAMLError as exc:
        return [Problem(source or "<yaml>", "", "YAML syntax", str(exc).replace("\n", " "))]
    if not docs:
        return [Problem(source or "<yaml>", "", "documents", "contains no documents")]
    return validate_documents(docs, karpenter=karpenter, trainer=trainer, source=source)


def validate_files(paths, *, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER) -> list[Problem]:
    problems = []
    for path in map(Path, paths):
        if not path.is_file():
            raise WorkshopError(f"manifest file {str(path)!r} not found")
        problems.extend(validate_yaml(path.read_text(), karpenter=karpenter, trainer=trainer, source=str(path)))
    return problems


def ensure_valid(docs: list, *, karpenter: str = DEFAULT_KARPENTER, trainer: str = DEFAULT_TRAINER) -> None:
    """Raise WorkshopError naming every problem; used before anything is written or applied."""
    problems = validate_documents(docs, karpenter=karpenter, trainer=trainer)
    if problems:
        raise WorkshopError(f"{len(problems)} problem(s) in the manifests:\n" + "\n".join(map(str, problems)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workshop validate", description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", metavar="FILE", help="YAML files (multi-document allowed)")
    parser.add_argument("--karpenter", default=DEFAULT_KARPENTER, help="Karpenter CRD release (default %(default)s)")
    parser.add_argument("--trainer", default=DEFAULT_TRAINER, help="Kubeflow Trainer CRD release (default %(default)s)")
    parser.add_argument("--rules", action="store_true", help="list every CEL rule and whether it is evaluated")
    args = parser.parse_args(argv)
    try:
        if args.rules:
            for info in rule_inventory(karpenter=args.karpenter, trainer=args.trainer):
                print(f"{info.kind:24} {info.path:50} {info.status:12.60} {info.rule}")
            if not args.files:
                return 0
        if not args.files:
            raise WorkshopError("give at least one manifest FILE (or --rules)")
        problems = validate_files(args.files, karpenter=args.karpenter, trainer=args.trainer)
    except WorkshopError as exc:
        return report(exc)
    for problem in problems:
        print(problem)
    versions = f"Karpenter {args.karpenter}, Trainer {args.trainer}"
    if problems:
        print(f"{len(problems)} problem(s) ({versions})", file=sys.stderr)
        return 1
    print(f"all valid: {', '.join(args.files)} ({versions})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
