"""The one module of table formatting, at the bottom layer so every layer may use it: a plain-text table of
dicts (notebooks print it without pandas), a markdown table (the benchmark summaries) and aligned columns
without a header (the teardown listing)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table(rows: list[dict], columns: list[str] | None = None) -> str:
    """`rows` (dicts) as a plain-text table, one line per row under a header (notebooks show it without
    pandas); `columns`: which keys, in order (default: the first row's)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*columns), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in cells]
    )


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table as text: the header, its rule, one line per row (each cell as str())."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def aligned(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    """Rows of strings as lines with every column but the last padded to its widest cell (no header; the last
    column is free text, so no trailing spaces)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


def hours_text(h: float) -> str:
    """Hours as a reader writes them: 1,502 (not 1.5e+03), 382, 0.775."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"
