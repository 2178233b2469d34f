"""The numbers `workshop plan` takes, checked as text while parsing: a value that is not a finite number,
or outside the range where the estimate means anything, is one `error:` line naming the flag and the value as
typed, exit 2 (an efficiency of 1e-308 or a checkpoint every 1e-308 minutes is not a slow plan, it is a
meaningless one). The `type=` raises BadFlag, which argparse lets through, so no usage block buries it."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from workshop.errors import WorkshopError
from workshop.plan.options import LIMITS


class BadFlag(Exception):  # noqa: N818 - not a ValueError, so argparse lets it through unchanged
    """A flag's value refused by its `type=`; parse() turns it into the command's WorkshopError."""


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parser.parse_args, a refused value ending as one WorkshopError line (argparse's own errors keep their
    usage block and exit 2)."""
    try:
        return parser.parse_args(argv)
    except BadFlag as exc:
        raise WorkshopError(str(exc)) from None


def _bounds(low: float, high: float, low_open: bool) -> str:
    return f"{'(' if low_open else '['}{low:g}, {high:g}]"


def number(flag: str, name: str, *, zero: bool = False) -> Callable[[str], float]:
    """An argparse `type=` for a float flag whose range is options.LIMITS[name] (`zero`: 0 also allowed,
    meaning "off")."""
    low, high, low_open = LIMITS[name]

    def parse(text: str) -> float:
        try:
            value = float(text.replace("_", ""))
        except ValueError:
            raise BadFlag(f"{flag} {text!r} is not a number") from None
        if not math.isfinite(value):
            raise BadFlag(f"{flag} {text!r} is not a finite number")
        inside = low <= value <= high and not (low_open and value == low)
        if not (inside or (zero and value == 0)):
            also = " or 0" if zero else ""
            raise BadFlag(f"{flag} {text!r} is out of range; allowed {_bounds(low, high, low_open)}{also}")
        return value

    return parse


def count(flag: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse `type=` for a whole number in [low, high], written as digits."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise BadFlag(f"{flag} {text!r} is not a whole number") from None
        if not low <= value <= high:
            raise BadFlag(f"{flag} {text!r} is out of range; allowed [{low}, {high}]")
        return value

    return parse
