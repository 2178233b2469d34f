"""The one plain-text table formatter: rows of dicts in, aligned columns out (notebooks print it without
pandas; every layer above report/ may use it)."""

from __future__ import annotations


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
