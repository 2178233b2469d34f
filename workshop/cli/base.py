"""The one wrapper every command goes through: bad input (a WorkshopError) becomes one `error: ...` line on
stderr and exit code 2, no traceback; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Protocol

from workshop.errors import exit_code


class Command(Protocol):
    """What `workshop NAME ARGS` calls: `main(argv)` (None: sys.argv) -> exit code."""

    def __call__(self, argv: list[str] | None = None) -> int: ...


def command(fn: Callable[[list[str] | None], int | None]) -> Command:
    """Make `fn(argv)` a command: its return value (None = 0) is the exit code, a WorkshopError exits 2."""

    @functools.wraps(fn)
    def run(argv: list[str] | None = None) -> int:
        return exit_code(fn, argv)

    return run
