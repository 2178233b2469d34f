"""Plain YAML scalars typed the way kubectl types them, so a file reads the same to PyYAML and to Go.

PyYAML follows YAML 1.1, where a float needs a dot: it reads `2e-05` as a string. kubectl reads manifests with
sigs.k8s.io/yaml (a fork of Go's yaml.v2), which reads `2e-05`, `1e8`, `0x1F`, `0o17` and `09` as numbers and
`y`/`n`/`on`/`off` as booleans; yaml.v3 and the YAML 1.2 core schema type a subset of these the same way. A
TrainJob written by PyYAML with `- 2e-05` among its args was refused by the API server
(`.spec.trainer.args[25]: expected string`) although PyYAML, and so the offline validator, read a string.

Two uses: `GoLoader` reads a file as kubectl would (the validator and `cluster apply` judge and send that),
and `needs_quotes` tells the dumper which strings must be quoted for every reader to see a string.
"""

from __future__ import annotations

import math
import re

import yaml

_BOOL = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULL = ("", "~", "null", "Null", "NULL")
_SPECIAL_FLOAT = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# strconv.ParseInt(s, 0, 64) after yaml.v2 removed every '_': base prefixes, a leading 0 means octal
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # yaml.v2's yamlStyleFloat
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # strconv.ParseFloat of a scalar starting with '.'
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[-+][0-9]{2}:[0-9]{2})?)?"
)

STR, BOOL, INT, FLOAT, NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "bool", "int", "float", "null"))
TIMESTAMP = "tag:yaml.org,2002:timestamp"


def _go_int(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-")
    base = 10
    if len(digits) > 1 and digits[0] == "0":
        base = {"x": 16, "o": 8, "b": 2}.get(digits[1:2].lower(), 8)
    if base != 10 and digits[1:2].isalpha():
        digits = digits[2:]
    value = sign * int(digits or "0", base)
    return value if -(2**63) <= value < 2**64 else None  # ParseInt, then ParseUint


def resolve(text: str) -> tuple[str, object]:
    """(tag, value) that Go's yaml.v2 (as used by kubectl) gives a plain scalar. Timestamps stay strings there
    (for `interface{}` targets, which is what YAML-to-JSON uses), so they come back as STR with the text."""
    if text in _BOOL:
        return BOOL, _BOOL[text]
    if text in _NULL:
        return NULL, None
    if text in _SPECIAL_FLOAT:
        return FLOAT, _SPECIAL_FLOAT[text]
    if text[0] == ".":
        return (FLOAT, float(text)) if _DOT_FLOAT.fullmatch(text) else (STR, text)
    if text[0] not in "+-0123456789":
        return STR, text
    if _TIMESTAMP.fullmatch(text):
        return STR, text
    plain = text.replace("_", "")
    if plain and (value := _go_int(plain)) is not None:
        return INT, value
    if _GO_FLOAT.fullmatch(plain):
        return FLOAT, float(plain)
    return STR, text


def go_tag(text: str) -> str:
    """The tag Go gives a plain scalar; a timestamp-looking one is reported as TIMESTAMP (it must be quoted
    for PyYAML, which reads a datetime)."""
    tag, _ = resolve(text)
    return TIMESTAMP if tag == STR and text[:1].isdigit() and _TIMESTAMP.fullmatch(text) else tag


_PYYAML = yaml.resolver.Resolver()


def pyyaml_tag(text: str) -> str:
    return _PYYAML.resolve(yaml.ScalarNode, text, (True, False))


def needs_quotes(text: str) -> bool:
    """Would any reader we care about (PyYAML/YAML 1.1, Go yaml.v2 as in kubectl, yaml.v3/YAML 1.2 core)
    type this string, written plain, as something other than a string?"""
    return pyyaml_tag(text) != STR or go_tag(text) != STR


# -------------------------------------------------------------------------------------------- loading
_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class GoLoader(_Base):  # type: ignore[misc,valid-type]
    """A safe loader whose plain scalars get Go's types: what `kubectl apply -f` sends the server."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return resolve(value)[0]
        return super().resolve(kind, value, implicit)


def _construct(loader, node):
    if not node.style and node.tag in (BOOL, INT, FLOAT, NULL):  # plain: None (Python parser) or "" (C)
        tag, value = resolve(node.value)
        if tag == node.tag:
            return value
    return yaml.SafeLoader.yaml_constructors[node.tag](loader, node)  # an explicit tag: PyYAML's rules


for _tag in (BOOL, INT, FLOAT, NULL):
    GoLoader.add_constructor(_tag, _construct)
