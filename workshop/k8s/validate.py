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
   ObjectMeta and the core Secret are small schemas here, run by the same validator;
4. CEL rules with cel-python plus the Kubernetes extension functions in `cel_ext`. Transition rules
   (those reading `oldSelf`) compare against the stored object and are skipped — `rule_inventory()` says
   which rules run and which cannot, and why.

Which types? The file's plain scalars are typed as kubectl types them (Go's YAML, see `goyaml`): `- 2e-05`
among a TrainJob's args is a number there, and the server refuses it (`.spec.trainer.args[25]`); PyYAML
would have read a string and passed it.

Which release? A manifest is judged against the release its shape targets: a field that only some known
releases declare (Trainer: `runtimePatches` means 2.2+, `podTemplateOverrides` means 2.1; Karpenter:
EC2NodeClass `networkInterfaces` means newer than 1.8) picks those releases; with no such clue it is judged
against every known release and the verdict says which accept it. `--trainer`/`--karpenter` force one.
"""

from __future__ import annotations

import base64
import binascii
import copy
import difflib
import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import celpy
import celpy.celtypes as ct
import yaml
from jsonschema import Draft4Validator, ValidationError, validators

from workshop.errors import WorkshopError, read_text
from workshop.k8s import cel_ext, crds
from workshop.k8s.base import load_yaml_docs
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


@dataclass(frozen=True)
class Problem:
    doc: str  # "NodePool/cpu-amx (document 1)"
    path: str  # "spec.template.spec.requirements[0].values"
    rule: str  # schema keyword ("type", "enum", "unknown field", ...) or the CEL rule text
    message: str
    release: str = ""  # "Karpenter 1.8.8, 1.14.1": the release(s) that reject it; "" for core kinds

    def __str__(self) -> str:
        where = f" ({self.release})" if self.release else ""
        return f"{self.doc}: {self.path or '(root)'}: {self.message} [rule: {self.rule}]{where}"


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


# ---------------------------------------------------------------------------------------- helpers
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _path(parts) -> str:
    out = ""
    for key in parts:
        out = _join(out, key)
    return out


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value) -> str:
    names = {
        type(None): "null",
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }
    return names.get(type(value), type(value).__name__)


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DURATION = re.compile(
    r"^[-+]?(0|(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$"
)
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _quantity_error(value: str) -> str | None:
    try:
        cel_ext.parse_quantity(value)
    except ValueError:
        return "is not a quantity (e.g. 500m, 64Gi, 2)"
    return None


def _byte_error(value: str) -> str | None:
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
        return (
            f"name part {name!r} must be 1-63 alphanumerics, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return None


def _matches(regex, message):
    return lambda v: None if regex.match(v) else message


# format -> (the rule a problem names, check: value -> error text or None). The first six are the formats the
# API server validates in CRD schemas; the rest are ObjectMeta's hand-coded checks, named as formats here.
_FORMATS = {
    "int32": ("format: int32", lambda v: None if -(2**31) <= v < 2**31 else "is out of the int32 range"),
    "int64": ("format: int64", lambda v: None if -(2**63) <= v < 2**63 else "is out of the int64 range"),
    "date-time": (
        "format: date-time",
        _matches(_RFC3339, "is not an RFC 3339 date-time (e.g. 2025-01-31T12:00:00Z)"),
    ),
    "date": ("format: date", _matches(re.compile(r"^\d{4}-\d{2}-\d{2}$"), "is not a date (YYYY-MM-DD)")),
    "duration": ("format: duration", _matches(_DURATION, "is not a duration (e.g. 30s, 20m, 720h)")),
    "quantity": ("format: quantity", _quantity_error),
    "byte": ("format: byte", _byte_error),
    "dns1123-subdomain": (
        "DNS-1123 subdomain",
        lambda v: (
            None
            if len(v) <= 253 and _DNS1123_SUBDOMAIN.match(v)
            else "must be lowercase alphanumerics, '-' or '.', at most 253 characters"
        ),
    ),
    "dns1123-label": (
        "DNS-1123 label",
        lambda v: (
            None
            if len(v) <= 63 and _DNS1123_LABEL.match(v)
            else "must be lowercase alphanumerics or '-', at most 63 characters"
        ),
    ),
    "qualified-name": ("qualified name", lambda v: _qualified_name_error(v)),
    "label-value": (
        "label value",
        lambda v: (
            None
            if len(v) <= 63 and _LABEL_VALUE.match(v)
            else "must be at most 63 alphanumerics, '-', '_', '.'"
        ),
    ),
}
_INTEGER_FORMATS = ("int32", "int64")

# ObjectMeta: a CRD schema only says `metadata: {type: object}`; the API server checks it by hand.
_STRING_MAP = {
    "type": "object",
    "propertyNames": {"format": "qualified-name"},
    "additionalProperties": {"type": "string"},
}
OBJECT_META = {
    "type": "object",
    "required": ["name"],  # server-side apply needs a name (generateName is not enough)
    "properties": {
        "name": {"type": "string", "format": "dns1123-subdomain"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string", "format": "dns1123-label"},
        "labels": {**_STRING_MAP, "additionalProperties": {"type": "string", "format": "label-value"}},
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "managedFields": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        **{k: {"type": "string"} for k in ("uid", "resourceVersion", "selfLink")},
        **{k: {"type": "string", "format": "date-time"} for k in ("creationTimestamp", "deletionTimestamp")},
        **{k: {"type": "integer", "format": "int64"} for k in ("generation", "deletionGracePeriodSeconds")},
    },
}
_SECRET_KEYS = {"pattern": r"^[-._a-zA-Z0-9]+$"}
SECRET = {  # core/v1 Secret: no CRD exists for core kinds
    "type": "object",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["Secret"]},
        "metadata": OBJECT_META,
        "data": {
            "type": "object",
            "propertyNames": _SECRET_KEYS,
            "additionalProperties": {"type": "string", "format": "byte"},
        },
        "stringData": {
            "type": "object",
            "propertyNames": _SECRET_KEYS,
            "additionalProperties": {"type": "string"},
        },
        "type": {"type": "string"},
        "immutable": {"type": "boolean"},
    },
}

_QUANTITY = {"x-kubernetes-int-or-string": True, "format": "quantity"}
STORAGE_CLASS = {  # storage.k8s.io/v1 StorageClass (the fields of the Kubernetes API reference)
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "provisioner"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["storage.k8s.io/v1"]},
        "kind": {"type": "string", "enum": ["StorageClass"]},
        "metadata": OBJECT_META,
        "provisioner": {"type": "string", "minLength": 1},
        "parameters": _STRING_MAP,
        "reclaimPolicy": {"type": "string", "enum": ["Delete", "Retain"]},
        "volumeBindingMode": {"type": "string", "enum": ["Immediate", "WaitForFirstConsumer"]},
        "allowVolumeExpansion": {"type": "boolean"},
        "mountOptions": {"type": "array", "items": {"type": "string"}},
        "allowedTopologies": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}
PERSISTENT_VOLUME_CLAIM = {  # core/v1 PersistentVolumeClaim
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["PersistentVolumeClaim"]},
        "metadata": OBJECT_META,
        "spec": {
            "type": "object",
            "required": ["accessModes", "resources"],
            "properties": {
                "accessModes": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "string",
                        "enum": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
                    },
                },
                "storageClassName": {"type": "string"},
                "volumeMode": {"type": "string", "enum": ["Filesystem", "Block"]},
                "volumeName": {"type": "string"},
                "resources": {
                    "type": "object",
                    "required": ["requests"],
                    "properties": {
                        "requests": {
                            "type": "object",
                            "required": ["storage"],
                            "additionalProperties": _QUANTITY,
                        },
                        "limits": {"type": "object", "additionalProperties": _QUANTITY},
                    },
                },
                "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "dataSource": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
CORE_SCHEMAS = {
    "Secret": SECRET,
    "StorageClass": STORAGE_CLASS,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIM,
}


# ------------------------------------------------------------------ the Kubernetes dialect of jsonschema
def _child(validator, value, schema, key):
    """Descend into one field or item; a null is an error unless the field is `nullable` (as on the
    server)."""
    if value is None:
        if not schema.get("nullable"):
            yield ValidationError(
                "is null, but the field is not nullable (omit it instead)", validator="nullable", path=[key]
            )
        return
    yield from validator.descend(value, schema, path=key, schema_path=key)


def _properties(validator, properties, instance, schema):
    if not isinstance(instance, dict):
        return
    for key, sub in properties.items():  # the API server defaults before it validates (and CEL sees defaults)
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
    open_ = schema.get("additionalProperties") not in (None, False) or schema.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    embedded = schema.get("x-kubernetes-embedded-resource")
    for key, value in instance.items():
        if key in properties:
            yield from _child(validator, value, properties[key], key)
        elif not open_ and not (embedded and key in ("apiVersion", "kind", "metadata")):
            hint = difflib.get_close_matches(key, list(properties), n=1)
            yield ValidationError(
                f'unknown field "{key}"'
                + (f' (did you mean "{hint[0]}"?)' if hint else f"; known: {', '.join(properties)}"),
                validator="unknown field",
                path=[key],
            )


def _additional_properties(validator, extra, instance, schema):
    if not isinstance(instance, dict):
        return
    props = schema.get("properties") or {}
    for key, value in instance.items():
        if key in props:
            continue
        if isinstance(extra, dict):
            yield from _child(validator, value, extra, key)
        elif extra is False and not props:
            yield ValidationError(f'unknown field "{key}"', validator="unknown field", path=[key])


def _items(validator, items, instance, schema):
    if isinstance(instance, list) and isinstance(items, dict):
        for i, item in enumerate(instance):
            yield from _child(validator, item, items, i)


def _property_names(validator, names, instance, schema):
    if isinstance(instance, dict):
        for key in instance:
            for error in validator.descend(key, names, path=key):
                error.message = f"key {error.message}"
                yield error


def _required(validator, required, instance, schema):
    if isinstance(instance, dict):
        for key in required:
            if key not in instance:
                yield ValidationError("is required", path=[key])


def _type(validator, want, instance, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return  # the keyword of its own name checks it
    if not validator.is_type(instance, want):
        hint = ""
        if want == "string" and (instance is None or isinstance(instance, (bool, int, float))):
            hint = " (a plain YAML scalar kubectl reads as a number/boolean/null: quote it)"
        yield ValidationError(f"must be of type {want}, got {_type_name(instance)} {_short(instance)}{hint}")


def _int_or_string(validator, on, instance, schema):
    if on and (isinstance(instance, bool) or not isinstance(instance, (int, str))):
        yield ValidationError(
            f"must be an integer or a string, got {_type_name(instance)} {_short(instance)}"
        )


def _any_of(validator, any_of, instance, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return  # anyOf [integer, string] is how int-or-string is spelled; reported once, above
    for error in Draft4Validator.VALIDATORS["anyOf"](validator, any_of, instance, schema):
        first = "; ".join(dict.fromkeys(e.message for e in error.context))
        error.message = "matches none of the allowed alternatives" + (f" ({first})" if first else "")
        yield error


def _enum(validator, enum, instance, schema):
    if instance not in enum:
        yield ValidationError(
            f"unsupported value {_short(instance)}; allowed: " + ", ".join(map(json.dumps, enum))
        )


def _pattern(validator, pattern, instance, schema):
    if isinstance(instance, str) and not re.search(pattern, instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern}")


def _format(validator, fmt, instance, schema):
    if fmt not in _FORMATS or isinstance(instance, bool):
        return  # other formats are not checked by the API server either
    if not isinstance(instance, int if fmt in _INTEGER_FORMATS else str):
        return
    rule, check = _FORMATS[fmt]
    err = check(instance)
    if err:
        yield ValidationError(f"{_short(instance)} {err}", validator=rule)


def _list_type(validator, kind, instance, schema):
    if not isinstance(instance, list):
        return
    seen: dict[tuple[str, ...] | str, int] = {}  # an entry's identity -> its first index
    if kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        for i, item in enumerate(instance):
            if isinstance(item, dict):
                ident = tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)
                if ident in seen:
                    yield ValidationError(
                        f"duplicate entry for key ({', '.join(f'{k}={item.get(k)!r}' for k in keys)});"
                        f" first at [{seen[ident]}]",
                        validator="x-kubernetes-list-map-keys",
                        path=[i],
                    )
                seen.setdefault(ident, i)
    elif kind == "set":
        for i, item in enumerate(instance):
            value = json.dumps(item, sort_keys=True)
            if value in seen:
                yield ValidationError(
                    f"duplicate value {_short(item)}; first at [{seen[value]}]",
                    validator="x-kubernetes-list-type: set",
                    path=[i],
                )
            seen.setdefault(value, i)


def _is_integer(checker, value) -> bool:  # YAML may give 4.0 for an integer field; the server accepts it
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer()
    )


KubernetesValidator = validators.extend(
    Draft4Validator,
    validators={
        "properties": _properties,
        "additionalProperties": _additional_properties,
        "items": _items,
        "propertyNames": _property_names,
        "required": _required,
        "type": _type,
        "anyOf": _any_of,
        "enum": _enum,
        "pattern": _pattern,
        "format": _format,
        "x-kubernetes-int-or-string": _int_or_string,
        "x-kubernetes-list-type": _list_type,
    },
    type_checker=Draft4Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)
KubernetesValidator.__doc__ = (
    "jsonschema's Draft 4 validator speaking the Kubernetes structural-schema dialect."
)


def _structural(obj: dict, schema: dict, label: str, release: str) -> list[Problem]:
    """Problems of `obj` (defaulted in place) against a schema, deepest first per field, as Problems."""
    errors = sorted(
        KubernetesValidator(schema).iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]
    )
    return [Problem(label, _path(e.absolute_path), str(e.validator), e.message, release) for e in errors]


# ------------------------------------------------------------------------------------------ CEL
_ENV = celpy.Environment()
_BUILTINS = set(celpy.evaluation.base_functions) | {
    "has",
    "all",
    "exists",
    "exists_one",
    "filter",
    "map",
    "dyn",
}
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


def _cel(value, schema: dict, path: str, label: str, release: str, *, root: bool = False) -> list[Problem]:
    """Every CEL rule on the way down, with `self` bound as the API server binds it."""
    if value is None:
        return []
    want = schema.get("type")
    if want and not schema.get("x-kubernetes-int-or-string") and not _TYPES.is_type(value, want):
        return []  # already reported by the schema pass; a rule on a mistyped value would only add noise
    out = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if rule_status(rule["rule"]) is not None:
            continue  # skipped: transition rule or a function we do not provide (see rule_inventory)
        self_value = value
        if root:  # at the root, Kubernetes exposes only metadata.name and metadata.generateName
            meta = value.get("metadata") or {}
            self_value = {**value, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}
        ok, err = _run_rule(rule["rule"], self_value)
        if not ok:
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            if err:
                message = (
                    f"{message} (the rule could not be evaluated: {err}; the API server rejects that too)"
                )
            where = _join(path, rule["fieldPath"].lstrip(".")) if rule.get("fieldPath") else path
            out.append(Problem(label, where, rule["rule"], message, release))
    if isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, item in value.items():
            if root and key == "metadata":
                continue
            sub = props.get(key, extra if key not in props else None)
            if isinstance(sub, dict):
                out += _cel(item, sub, _join(path, key), label, release)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += _cel(item, schema["items"], _join(path, i), label, release)
    return out


_TYPES = KubernetesValidator.TYPE_CHECKER


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
        return _structural(copy.deepcopy(doc), CORE_SCHEMAS[doc["kind"]], label, "")
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
                f"{_short(doc.get('apiVersion'))} is not served for {kind}; use {', '.join(served)}",
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
    problems = _structural(obj, schema, label, release)  # defaults obj in place, as the server does
    return problems + _cel(obj, schema, "", label, release, root=True)


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
            problems=[Problem(label, "", "type", f"a manifest must be a mapping, got {_type_name(doc)}")],
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
                    f"unknown kind {_short(kind)}; this validator knows: {', '.join(KIND_FAMILY)}",
                )
            ],
        )
    family = KIND_FAMILY[kind]
    if family == "core":
        return Verdict(label, family, problems=_against(doc, label, family, ""))
    forced = karpenter if family == "karpenter" else trainer
    releases = [forced] if forced else list(known_releases(family))
    per_release = {v: _against(doc, label, family, v) for v in releases}
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
