"""Argument types the commands share (argparse lives only in this folder)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable


def summary(doc: str | None) -> str:
    """A command's --help description: the first paragraph of a docstring, joined into one line (its
    first line alone would cut a sentence mid-way)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def comma_list(
    item: Callable = str,
    *,
    choices: Iterable | None = None,
    minimum: float | None = None,
    noun: str = "values",
) -> Callable[[str], list]:
    """An argparse `type=` for 'a,b,c': at least one item, each converted by `item` and checked, so a bad
    value fails while parsing, with the flag's name (argparse adds it) and the allowed values."""
    allowed = list(choices) if choices is not None else None

    def parse(text: str) -> list:
        parts = [x.strip() for x in str(text).split(",") if x.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated {noun}, got {text!r}")
        try:
            values = [item(x) for x in parts]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {noun}, got {text!r}") from None
        for v in values:
            if allowed is not None and v not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {v!r} in {text!r}; allowed: {', '.join(map(str, allowed))}"
                )
            if minimum is not None and v < minimum:
                raise argparse.ArgumentTypeError(f"{v} in {text!r} is below {minimum}")
        return values

    return parse
