"""Printed sentences that read in JupyterLab: wrapped between words, tables kept whole.

JupyterLab shows `print()` output in a `<pre>` with `word-break: break-all`, so a sentence longer than the
output area wraps in the middle of a word ("per nod e"), and a wide table wraps into a jumble. `say()` shows
the same text as HTML instead: prose lines as paragraphs the browser wraps at spaces (at any width, Korean
too), aligned lines (tables, indented blocks) as a `<pre>` that never wraps and scrolls sideways. Its
text/plain is the text itself, so papermill, nbval and a terminal read exactly what `print()` would have
written.
"""

from __future__ import annotations

import html
import re

# a line is part of a table or an aligned block when it has a run of 2+ spaces between words or is a rule
# (----, ====); an indented sentence stays prose, indented
_ALIGNED = re.compile(r"\S {2,}\S|^[-=+| ]{4,}$")
_PRE = 'style="white-space: pre; word-break: normal; overflow-x: auto; margin: 0.2em 0"'
# keep-all: Korean wraps at spaces too, not between any two syllables (the browser's default for Hangul)
_P = 'style="margin: 0.2em 0; white-space: normal; word-break: keep-all; overflow-wrap: break-word"'


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The text cut into runs of prose lines and of aligned lines: [("prose"|"pre", lines), ...]."""
    out: list[tuple[str, list[str]]] = []
    for line in text.rstrip("\n").split("\n"):
        kind = "pre" if _ALIGNED.search(line) else "prose"
        if out and out[-1][0] == kind:
            out[-1][1].append(line)
        else:
            out.append((kind, [line]))
    return out


def to_html(text: str) -> str:
    """Prose as paragraphs (one per line: the line breaks the text chose stay), tables as unwrapped <pre>."""
    parts = []
    for kind, lines in blocks(text):
        if kind == "pre":
            parts.append(f"<pre {_PRE}>" + html.escape("\n".join(lines)) + "</pre>")
        else:
            for line in lines:
                indent = len(line) - len(line.lstrip(" "))
                style = _P[:-1] + (f'; padding-left: {indent}ch"' if indent else '"')
                parts.append(f"<p {style}>{html.escape(line.strip()) or '&nbsp;'}</p>")
    return '<div class="workshop-say">' + "".join(parts) + "</div>"


class Text:
    """Text a notebook shows: HTML in a frontend, the text itself everywhere else (repr, nbval, papermill)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, **kwargs):
        return {"text/plain": self.text, "text/html": to_html(self.text)}


def say(*texts: object) -> None:
    """`print()` for a learner: the same text (the arguments joined by newlines), wrapped between words."""
    from IPython.display import display

    display(Text("\n".join(str(t) for t in texts)))
