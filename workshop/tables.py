"""The one module of table formatting, at the bottom layer so every layer may use it: a plain-text table of
dicts (notebooks print it without pandas), a markdown table (the benchmark summaries) and aligned columns
without a header (the teardown listing)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence


def width(text: str) -> int:
    """Columns `text` takes in a terminal or a <pre> block: a Hangul syllable or another wide (East Asian)
    character takes two, so a Korean label padded by len() would push its row out of line."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def ljust(text: str, columns: int) -> str:
    """`text` padded with spaces to `columns` display columns (str.ljust counts characters)."""
    return text + " " * max(0, columns - width(text))


def rjust(text: str, columns: int) -> str:
    """`text` right-aligned in `columns` display columns."""
    return " " * max(0, columns - width(text)) + text


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    """`rows` (dicts) as a plain-text table, one line per row under a header (notebooks show it without
    pandas); `columns`: which keys, in order (default: the first row's)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(width(c), *(width(row[i]) for row in cells)) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(ljust(v, w) for v, w in zip(values, widths))

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table as text: the header, its rule, one line per row (each cell as str())."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def aligned(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """Rows of strings as lines with every column but the last padded to its widest cell (no header; the last
    column is free text, so no trailing spaces)."""
    widths = [max(width(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [indent + "  ".join(ljust(c, w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


def hours_text(h: float) -> str:
    """Hours as a reader writes them: 1,502 (not 1.5e+03), 382, 0.775."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"
