"""A dataclass from one section of a JSON file, each field checked against its annotation: what a plan file
(workshop.plan.job.load_plan) is read with, so a missing, unknown or mistyped field is one error naming it.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from workshop.errors import WorkshopError

_KINDS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
}


def build(cls: type, section: dict[str, Any], key: str, *, every_field: bool = False) -> Any:
    """A dataclass from a plan file's section: every field without a default present (`every_field`: every
    field, where the defaults are not the file's), each of its type."""
    kw: dict[str, Any] = {}
    known = {f.name for f in fields(cls)}
    extra = sorted(set(section) - known)
    if extra:
        raise WorkshopError(
            f"plan file field '{key}.{extra[0]}' is unknown; {key} has: {', '.join(sorted(known))}"
        )
    for f in fields(cls):
        name = f"{key}.{f.name}"
        if f.name not in section:
            if not every_field and (f.default is not MISSING or f.default_factory is not MISSING):
                continue
            raise WorkshopError(f"plan file field '{name}' is missing")
        value = section[f.name]
        kinds = str(f.type).replace(" ", "").split("|")
        ok = any(
            (k == "None" and value is None)
            or (
                k in _KINDS and isinstance(value, _KINDS[k]) and not (k != "bool" and isinstance(value, bool))
            )
            or (k.startswith("dict") and isinstance(value, dict))
            or (k.startswith("tuple") and isinstance(value, list) and all(isinstance(v, str) for v in value))
            for k in kinds
        )
        if not ok:
            raise WorkshopError(f"plan file field '{name}' must be {f.type}, got {value!r}")
        kw[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**kw)
