"""The Kubernetes CEL library functions that cel-python lacks, so CRD rules run as the API server runs them.

cel-python implements the CEL standard (size, matches, startsWith, has(), all/exists/filter/map macros,
int(), ...). Kubernetes adds extension libraries on top: strings (split, find, lowerAscii, ...), lists
(isSorted, sum, ...), regex (find, findAll), url(), quantity() and format(). Karpenter's label rules use
`find` and its AMI-alias rules use `split`; without them those rules would silently not run. Each function
here follows the semantics documented for Kubernetes CEL; what is still missing is listed in
`UNSUPPORTED` and the validator reports any rule that needs it as skipped, never as passed.
"""

from __future__ import annotations

import itertools
import re
import urllib.parse
from decimal import Decimal, InvalidOperation

import celpy.celtypes as ct

try:  # cel-python depends on google-re2; RE2 is the regex dialect Kubernetes CEL uses.
    import re2 as _re
except ImportError:  # pragma: no cover
    _re = re


def _s(x) -> ct.StringType:
    return ct.StringType(x)


# --- strings -------------------------------------------------------------------------------------
def char_at(s, i):
    i = int(i)
    if i < 0 or i > len(s):
        raise ValueError(f"charAt index {i} out of range")
    return _s(s[i] if i < len(s) else "")


def index_of(target, sub, start=0):
    if isinstance(target, list):  # lists library
        return ct.IntType(next((n for n, v in enumerate(target) if v == sub), -1))
    return ct.IntType(str(target).find(str(sub), int(start)))


def last_index_of(target, sub, end=None):
    if isinstance(target, list):
        return ct.IntType(max((n for n, v in enumerate(target) if v == sub), default=-1))
    return ct.IntType(str(target).rfind(str(sub), 0, None if end is None else int(end) + len(sub)))


def split(s, sep, limit=None):
    limit = -1 if limit is None else int(limit)
    if limit == 0:
        return ct.ListType([])
    parts = str(s).split(str(sep), limit - 1) if limit > 0 else str(s).split(str(sep))
    return ct.ListType([_s(p) for p in parts])


def substring(s, start, end=None):
    return _s(str(s)[int(start) : None if end is None else int(end)])


def replace(s, old, new, limit=None):
    return _s(str(s).replace(str(old), str(new), -1 if limit is None else int(limit)))


def join(items, sep=""):
    return _s(str(sep).join(str(x) for x in items))


def reverse(x):
    return ct.ListType(list(x)[::-1]) if isinstance(x, list) else _s(str(x)[::-1])


def cel_format(fmt, args):
    """'%s/%d/%f/%x/%o/%b' placeholders, as Kubernetes' strings.format()."""
    args = list(args)
    out, i = [], 0

    def conv(m):
        nonlocal i
        spec = m.group(0)
        if spec == "%%":
            return "%"
        v = args[i]
        i += 1
        kind = spec[-1]
        if kind == "s":
            return str(v).lower() if isinstance(v, bool) else str(v)
        if kind == "b":
            return format(int(v), "b")
        return ("%" + spec[1:]) % (float(v) if kind in "feE" else int(v))

    out.append(re.sub(r"%(\.\d+)?[sdfeExXob%]", conv, str(fmt)))
    return _s("".join(out))


# --- regex ---------------------------------------------------------------------------------------
def find(s, pattern):
    m = _re.search(str(pattern), str(s))
    return _s(m.group(0) if m else "")


def find_all(s, pattern, limit=None):
    found = [m.group(0) for m in _re.finditer(str(pattern), str(s))]
    if limit is not None and int(limit) >= 0:
        found = found[: int(limit)]
    return ct.ListType([_s(f) for f in found])


# --- lists ---------------------------------------------------------------------------------------
def is_sorted(items):
    items = list(items)
    return ct.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def list_sum(items):
    items = list(items)
    return sum(items[1:], items[0]) if items else ct.IntType(0)


def list_min(items):
    if not items:
        raise ValueError("min of an empty list")
    return min(items)


def list_max(items):
    if not items:
        raise ValueError("max of an empty list")
    return max(items)


# --- url -----------------------------------------------------------------------------------------
class URL:
    """Result of url(): Kubernetes accepts absolute URIs or absolute paths."""

    def __init__(self, text: str):
        parts = urllib.parse.urlsplit(text)
        if not (parts.scheme or text.startswith("/")):
            raise ValueError(f"{text!r} is not an absolute URL or path")
        self.parts = parts

    def __eq__(self, other):
        return isinstance(other, URL) and self.parts == other.parts


def url(s):
    return URL(str(s))


def is_url(s):
    try:
        URL(str(s))
        return ct.BoolType(True)
    except ValueError:
        return ct.BoolType(False)


# --- quantity ------------------------------------------------------------------------------------
QUANTITY_RE = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(text) -> Decimal:
    """Kubernetes resource.Quantity -> exact Decimal; ValueError when it is not a quantity."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return Decimal(str(text))
    m = QUANTITY_RE.match(str(text).strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 100m, 64Gi, 1.5)")
    number, suffix = Decimal(m.group(1)), m.group(2)
    if suffix is None:
        return number
    if suffix[0] in "eE" and len(suffix) > 1:
        try:
            return number * Decimal(10) ** int(suffix[1:])
        except InvalidOperation as exc:  # pragma: no cover
            raise ValueError(str(exc)) from exc
    return number * Decimal(_SUFFIX[suffix])


class Quantity:
    def __init__(self, text):
        self.text, self.value = str(text), parse_quantity(text)

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.value == other.value


def _q(x) -> Quantity:
    return x if isinstance(x, Quantity) else Quantity(x)


def quantity(s):
    return Quantity(str(s))


def is_quantity(s):
    try:
        parse_quantity(str(s))
        return ct.BoolType(True)
    except ValueError:
        return ct.BoolType(False)


def _q_add(a, b):
    out = Quantity("0")
    out.value = _q(a).value + _q(b).value
    out.text = str(out.value)
    return out


def _q_sub(a, b):
    out = Quantity("0")
    out.value = _q(a).value - _q(b).value
    out.text = str(out.value)
    return out


def _q_compare(a, b):
    a, b = _q(a).value, _q(b).value
    return ct.IntType((a > b) - (a < b))


# --- the table handed to cel-python --------------------------------------------------------------
FUNCTIONS = {
    # strings
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lambda s: _s(str(s).lower()),
    "upperAscii": lambda s: _s(str(s).upper()),
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": lambda s: _s(str(s).strip()),
    "join": join,
    "reverse": reverse,
    "format": cel_format,
    "quote": lambda s: _s('"' + str(s) + '"'),
    # regex
    "find": find,
    "findAll": find_all,
    # lists
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": list_min,
    "max": list_max,
    # url
    "url": url,
    "isURL": is_url,
    "getScheme": lambda u: _s(u.parts.scheme),
    "getHost": lambda u: _s(u.parts.netloc.rsplit("@", 1)[-1]),
    "getHostname": lambda u: _s(u.parts.hostname or ""),
    "getPort": lambda u: _s(str(u.parts.port) if u.parts.port else ""),
    "getEscapedPath": lambda u: _s(u.parts.path),
    "getQuery": lambda u: ct.MapType(
        {_s(k): ct.ListType([_s(x) for x in v]) for k, v in urllib.parse.parse_qs(u.parts.query).items()}
    ),
    # quantity
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": lambda q: ct.IntType((_q(q).value > 0) - (_q(q).value < 0)),
    "isInteger": lambda q: ct.BoolType(_q(q).value == _q(q).value.to_integral_value()),
    "asInteger": lambda q: ct.IntType(int(_q(q).value)),
    "asApproximateFloat": lambda q: ct.DoubleType(float(_q(q).value)),
    "add": _q_add,
    "sub": _q_sub,
    "compareTo": _q_compare,
    "isGreaterThan": lambda a, b: ct.BoolType(_q(a).value > _q(b).value),
    "isLessThan": lambda a, b: ct.BoolType(_q(a).value < _q(b).value),
}

# Kubernetes CEL features this validator does not provide; rules using them are reported as skipped.
UNSUPPORTED = {
    "ip": "the IP/CIDR library (ip, cidr, isIP, isCIDR) is not implemented",
    "cidr": "the IP/CIDR library is not implemented",
    "isIP": "the IP/CIDR library is not implemented",
    "isCIDR": "the IP/CIDR library is not implemented",
    "authorizer": "authorizer checks need a live API server",
    "optional": "optional types (?. and optional.of) are not supported by cel-python",
    "sets": "the sets library (sets.contains, ...) is not implemented",
    "oldSelf": "transition rule: compares with the stored object, which an offline check does not have",
}
