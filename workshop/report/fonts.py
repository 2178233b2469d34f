"""The figures' font for the learner's language: Korean figures need a font with Hangul.

matplotlib's default (DejaVu Sans) has no Hangul, so with WORKSHOP_LANG=ko its labels would print as boxes.
`apply()` registers Noto Sans KR (the `pylopdf-fonts-ko` wheel ships it, SIL OFL; else an installed
NanumGothic or Noto Sans CJK KR, e.g. Debian's fonts-nanum) as the fallback after DejaVu Sans: Latin letters
and digits keep the English figures' glyphs, Hangul comes from the Korean font. In English nothing changes.
Text takes its font when it is created, so plots.py calls this before it draws.
"""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
from matplotlib import font_manager

from workshop.lang import language

_SYSTEM_NAMES = ("NanumGothic", "Noto Sans CJK KR", "Noto Sans KR", "Malgun Gothic", "AppleGothic")
_DEFAULT_FAMILY = list(matplotlib.rcParamsDefault["font.family"])


@functools.cache
def korean_font() -> str | None:
    """The family name of a font with Hangul, registered with matplotlib; None when none is installed."""
    try:
        import pylopdf_fonts_ko

        path: Path | None = pylopdf_fonts_ko.sans_path()
    except ImportError:
        path = None
    if path is not None and path.is_file():
        font_manager.fontManager.addfont(str(path))
        return font_manager.FontProperties(fname=str(path)).get_name()
    installed = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in _SYSTEM_NAMES if name in installed), None)


def apply() -> str | None:
    """Set matplotlib's fonts for the current language; returns the Korean family in use (None in English,
    or when no Korean font is installed: then the labels stay readable only where they are ASCII)."""
    family = korean_font() if language() == "ko" else None
    # a list of families: matplotlib (>= 3.6) falls back glyph by glyph, in order
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", family] if family else _DEFAULT_FAMILY
    return family
