"""The learner's language: `_(msg)` gives the Korean sentence when WORKSHOP_LANG=ko, the English one
otherwise.

English is the source; Korean lives in the gettext catalog workshop/locale/ko/LC_MESSAGES/workshop.po
(`python -m workshop i18n update` extracts every `_()`/`N_()` string into it). The catalog ships as package
data and is compiled in memory on first use, so a fresh `pip install -e .` needs no build step. Messages use
`.format()` named fields (`_("{n} nodes").format(n=4)`) so a translation can move them within the sentence.
The variable is read at every call: the runner sets it for the kernel, a learner can set it before Jupyter.
"""

from __future__ import annotations

import functools
import gettext
import io
import os
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES = ("en", "ko")  # en: the source text, no catalog
DOMAIN = "workshop"  # workshop.po: the package's sentences (notebooks.po: the chapters' markdown)


def language() -> str:
    """The language asked for by WORKSHOP_LANG; anything unknown reads as English, the source."""
    lang = os.environ.get("WORKSHOP_LANG", "en").strip().lower()
    return lang if lang in LANGUAGES else "en"


def catalog_path(lang: str, domain: str = DOMAIN) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{domain}.po"


@functools.cache
def translations(lang: str, domain: str = DOMAIN) -> gettext.NullTranslations:
    """The catalog compiled to .mo in memory (Babel), fuzzy entries left out: they are not yet
    translations."""
    path = catalog_path(lang, domain)
    if lang == "en" or not path.is_file():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        catalog = read_po(f, locale=lang)
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def _(msg: str) -> str:
    """`msg` in the learner's language (English when untranslated)."""
    return translations(language()).gettext(msg)


def N_(msg: str) -> str:  # noqa: N802 (gettext's conventional name)
    """Marks a sentence for the catalog where it is defined (a constant); `_()` translates it where shown."""
    return msg
