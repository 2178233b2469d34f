"""One error type for bad input, so every command fails early with the bad value and the allowed ones."""

from __future__ import annotations

import sys
from collections.abc import Iterable


class WorkshopError(ValueError):
    """Bad input or an unmet precondition, raised before anything is launched or written."""


def check_choice(what: str, value, allowed: Iterable) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise WorkshopError(f"unknown {what} {value!r}; allowed: {', '.join(map(str, allowed))}")


def check_positive(what: str, value, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise WorkshopError(f"{what} must be a number {bound}, got {value!r}")


def report(error: WorkshopError) -> int:
    """How every command ends on bad input: one `error: ...` line on stderr and exit code 2, no traceback."""
    print(f"error: {error}", file=sys.stderr)
    return 2
