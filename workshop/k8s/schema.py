"""The Kubernetes dialect of JSON schema, as the API server checks a custom resource: jsonschema's Draft 4
(OpenAPI 3.0's boolean exclusiveMinimum) extended by nullable, x-kubernetes-int-or-string,
x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource, list-map keys and sets, the formats the
server checks, and unknown fields rejected as `kubectl --validate=strict` does. What it finds: `Problem`s.
"""

from __future__ import annotations

import base64
import binascii
import copy
import difflib
import json
import math
import re
from dataclasses import dataclass

from jsonschema import Draft4Validator, ValidationError, validators

from workshop.k8s import cel_ext


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


# ---------------------------------------------------------------------------------------- helpers
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def join_path(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def path_text(parts) -> str:
    out = ""
    for key in parts:
        out = join_path(out, key)
    return out


def short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def type_name(value) -> str:
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


def _non_finite(value: float) -> str:
    """kubectl reads a plain .inf/.nan as a float, then cannot write it as JSON: it refuses the file on the
    client ('json: unsupported value: +Inf') and sends nothing, whatever the field's type."""
    go = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return (
        f"is a plain YAML {go}: kubectl refuses the whole file on the client "
        f'("json: unsupported value: {go}") and sends nothing; quote it if a string is meant'
    )


def _type(validator, want, instance, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return  # the keyword of its own name checks it
    if isinstance(instance, float) and not math.isfinite(instance):
        yield ValidationError(_non_finite(instance))
        return
    if not validator.is_type(instance, want):
        hint = ""
        if want == "string" and (instance is None or isinstance(instance, (bool, int, float))):
            hint = " (a plain YAML scalar kubectl reads as a number/boolean/null: quote it)"
        yield ValidationError(f"must be of type {want}, got {type_name(instance)} {short(instance)}{hint}")


def _int_or_string(validator, on, instance, schema):
    if on and (isinstance(instance, bool) or not isinstance(instance, (int, str))):
        yield ValidationError(f"must be an integer or a string, got {type_name(instance)} {short(instance)}")


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
            f"unsupported value {short(instance)}; allowed: " + ", ".join(map(json.dumps, enum))
        )


def _pattern(validator, pattern, instance, schema):
    if isinstance(instance, str) and not re.search(pattern, instance):
        yield ValidationError(f"{short(instance)} does not match {pattern}")


def _format(validator, fmt, instance, schema):
    if fmt not in _FORMATS or isinstance(instance, bool):
        return  # other formats are not checked by the API server either
    if not isinstance(instance, int if fmt in _INTEGER_FORMATS else str):
        return
    rule, check = _FORMATS[fmt]
    err = check(instance)
    if err:
        yield ValidationError(f"{short(instance)} {err}", validator=rule)


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
                    f"duplicate value {short(item)}; first at [{seen[value]}]",
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


def structural(obj: dict, schema: dict, label: str, release: str) -> list[Problem]:
    """Problems of `obj` (defaulted in place) against a schema, deepest first per field, as Problems."""
    errors = sorted(
        KubernetesValidator(schema).iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]
    )
    return [Problem(label, path_text(e.absolute_path), str(e.validator), e.message, release) for e in errors]
