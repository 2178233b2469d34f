"""CEL rules (`x-kubernetes-validations`) run offline with cel-python and the Kubernetes extension functions
of `cel_ext`, with `self` bound as the API server binds it; a rule this validator cannot run says why."""

from __future__ import annotations

import re
from functools import cache

import celpy
import celpy.celtypes as ct

from workshop.k8s import cel_ext
from workshop.k8s.schema import KubernetesValidator, Problem, join_path

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


def run_rule(rule: str, value) -> tuple[bool, str | None]:
    try:
        result = _program(rule).evaluate({"self": celpy.json_to_cel(value)})
    except Exception as exc:  # noqa: BLE001 - CEL runtime errors (no such key, bad int()) fail the rule
        return False, str(exc.args[0] if exc.args else exc)[:120]
    if isinstance(result, celpy.CELEvalError):
        return False, str(result.args[0] if result.args else result)[:120]
    return bool(result) if isinstance(result, ct.BoolType) else False, None


def cel_problems(
    value, schema: dict, path: str, label: str, release: str, *, root: bool = False
) -> list[Problem]:
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
        ok, err = run_rule(rule["rule"], self_value)
        if not ok:
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            if err:
                message = (
                    f"{message} (the rule could not be evaluated: {err}; the API server rejects that too)"
                )
            where = join_path(path, rule["fieldPath"].lstrip(".")) if rule.get("fieldPath") else path
            out.append(Problem(label, where, rule["rule"], message, release))
    if isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key, item in value.items():
            if root and key == "metadata":
                continue
            sub = props.get(key, extra if key not in props else None)
            if isinstance(sub, dict):
                out += cel_problems(item, sub, join_path(path, key), label, release)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += cel_problems(item, schema["items"], join_path(path, i), label, release)
    return out


_TYPES = KubernetesValidator.TYPE_CHECKER
