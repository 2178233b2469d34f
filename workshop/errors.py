"""One error type for bad input, so every command fails early with the bad value and the allowed ones.

The readers below open a path as the kind of file it must be (text, JSON, ...) and turn every way that can
fail - missing, a folder, unreadable, empty, binary, malformed - into one WorkshopError naming the path.
How a command and a process end is here too: `exit_code` (bad input: one line, exit 2) and `exit_process`.
"""

from __future__ import annotations

import codecs
import gc
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn


class WorkshopError(ValueError):
    """Bad input or an unmet precondition, raised before anything is launched or written."""


def check_choice(what: str, value, allowed: Iterable) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise WorkshopError(f"unknown {what} {value!r}; allowed: {', '.join(map(str, allowed))}")


def check_positive(what: str, value, *, allow_zero: bool = False) -> None:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise WorkshopError(f"{what} must be a number {bound}, got {value!r}")


def check_count(what: str, value, *, low: int = 1, high: int | None = None) -> None:
    """The one count check (nodes, ranks, micro-batch, steps...): an integer >= low (and <= high)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and high is not None and value > high:
        ok = False
    if not ok:
        span = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise WorkshopError(f"{what} must be an integer {span}, got {value!r}")


def report(error: WorkshopError) -> int:
    """How every command ends on bad input: one `error: ...` line on stderr and exit code 2, no traceback."""
    print(f"error: {error}", file=sys.stderr)
    return 2


def exit_code(fn: Callable[..., int | None], *args: Any) -> int:
    """The one place bad input becomes an exit code: `fn(*args)`'s return value (None = 0), or, on a
    WorkshopError, one `error: ...` line and 2. Commands (workshop.cli.base.command) and the per-rank worker
    entry points both end through it."""
    try:
        return int(fn(*args) or 0)
    except WorkshopError as e:
        return report(e)


def exit_process(code: int | str | None = 0) -> NoReturn:
    """End this process as sys.exit(code) does, without Python's last full garbage collection: with torch and
    transformers loaded that walk takes about a second, paid by every rank and child before its launcher sees
    it end. The last line of the rank and child entry points only (`python -m workshop.train`, the workers
    of experiments/): their files are written whole and closed before it, and atexit handlers still run."""
    gc.freeze()
    sys.exit(code)


# ------------------------------------------------------------------------------------------ files


def read_text(path, what: str, expected: str = "a text file", *, limit: int | None = None) -> str:
    """The UTF-8 text of the file `what` (a flag such as '--dataset', or a noun) names. `limit` reads only
    that many bytes: enough to tell a text file from a binary one without reading gigabytes."""
    p = Path(path).expanduser()
    where = f"{what} {str(path)!r}"
    if p.is_dir():
        raise WorkshopError(f"{where} is a folder; expected {expected}")
    try:
        with open(p, "rb") as fh:
            data = fh.read() if limit is None else fh.read(limit)
    except FileNotFoundError:
        raise WorkshopError(f"{where}: no such file; expected {expected}") from None
    except OSError as e:
        raise WorkshopError(f"{where} cannot be read ({e.strerror or e}); expected {expected}") from None
    if not data.strip() and (limit is None or len(data) < limit):
        raise WorkshopError(f"{where} is empty; expected {expected}")
    try:
        if b"\0" in data:
            raise UnicodeError
        text = codecs.getincrementaldecoder("utf-8")().decode(
            data, final=limit is None
        )  # a cut-off last char is fine
    except UnicodeError:
        raise WorkshopError(f"{where} is a binary file, not UTF-8 text; expected {expected}") from None
    return text


def read_json(path, what: str, expected: str = "a JSON object", *, kind: type = dict):
    """The parsed JSON file `what` names, which must be a `kind` (a dict: a JSON object)."""
    text = read_text(path, what, expected)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkshopError(
            f"{what} {str(path)!r} is not JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            f"expected {expected}"
        ) from None
    if not isinstance(value, kind):
        raise WorkshopError(f"{what} {str(path)!r} holds a JSON {type(value).__name__}; expected {expected}")
    return value


def check_output(path, what: str, *, folder: bool = False) -> Path:
    """Refuse, before any work, an output path that cannot be the file (or folder) it must become: an existing
    one of the other kind, or a file where a parent folder has to be. Writability is left to the write (a
    TrainJob's paths are the container's, not this machine's)."""
    p = Path(path).expanduser()
    if p.exists() and p.is_dir() != folder:
        raise WorkshopError(
            f"{what} {str(path)!r} is {'a file' if folder else 'a folder'}; "
            f"expected {'a folder' if folder else 'a file'} path"
        )
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise WorkshopError(
            f"{what} {str(path)!r} cannot be created: {str(parent)!r} is a file, not a folder"
        )
    return p
