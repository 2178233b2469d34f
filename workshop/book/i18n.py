"""`workshop i18n update|generate|check|sync`: the workbook in Korean, kept in step with the English source.

English is the source. Two gettext catalogs (Babel) hold the Korean:
  workshop/locale/ko/LC_MESSAGES/notebooks.po  one message per markdown cell; msgctxt "<notebook stem>:<cell
  id>"; and one per comment of a code cell, msgctxt "<stem>:<cell id>#comment" (the code stays as is)
  workshop/locale/ko/LC_MESSAGES/workshop.po   every `_()`/`N_()` sentence of the package
  (workshop/lang.py)
`update` extracts both from the English and merges (new: empty; changed: fuzzy, the previous English kept as
`#| msgid`); `generate` writes notebooks-ko/NN_*.ipynb (same cells, ids and code, markdown and the code
cells' comments translated, outputs stripped); `check` fails naming every untranslated, fuzzy or stale
message (notebook + cell id) and every Korean notebook out of date. `sync` is the three in order: after the
English changes, run it, translate what it names in the .po files, run it again.

notebooks-ko/ sits beside notebooks/ (not inside it) so the code cells' relative paths ("../benchmarks/...",
"../out") mean the same in both, in JupyterLab as under `workshop run --lang ko`.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.pofile import read_po, write_po

from workshop.lang import catalog_path
from workshop.paths import NOTEBOOKS_DIR, NOTEBOOKS_KO_DIR, REPO

LANG = "ko"
PACKAGE = REPO / "workshop"
# fixed header dates: regenerating the catalogs from the same English must give the same bytes
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HINT = "python -m workshop i18n sync"


@dataclass(frozen=True)
class Domain:
    name: str  # the .po file's stem
    markdown: bool  # messages are markdown cells (structure checked) rather than format strings


NOTEBOOKS = Domain("notebooks", markdown=True)
WORKSHOP = Domain("workshop", markdown=False)
DOMAINS = (NOTEBOOKS, WORKSHOP)


def english_notebooks(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def _catalog(domain: Domain) -> Catalog:
    return Catalog(
        locale=LANG,
        domain=domain.name,
        project="workshop",
        version="0.1.0",
        copyright_holder="the workshop authors",
        msgid_bugs_address="https://github.com/gnosia93/training-on-eks/issues",
        last_translator="the workshop authors",
        language_team="ko",
        header_comment=f"# Korean catalog of the workbook ({domain.name}); English is the source.\n# After "
        f"English edits: {HINT}",
        creation_date=_EPOCH,
        revision_date=_EPOCH,
        fuzzy=False,
    )


def _read_nb(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def extract_notebooks(folder: Path = NOTEBOOKS_DIR) -> Catalog:
    """One message per markdown cell of the English notebooks, its context naming notebook and cell."""
    cat = _catalog(NOTEBOOKS)
    for path in english_notebooks(folder):
        for i, cell in enumerate(_read_nb(path).cells):
            if cell.cell_type == "markdown" and cell.source.strip():
                cat.add(
                    cell.source, context=f"{path.stem}:{cell.id}", locations=[(f"notebooks/{path.name}", i)]
                )
            elif cell.cell_type == "code":
                for _start, _end, text in comments(cell.source):
                    cat.add(
                        text,
                        context=f"{path.stem}:{cell.id}{COMMENT_CONTEXT}",
                        locations=[(f"notebooks/{path.name}", i)],
                    )
    return cat


# ---------------------------------------------------------------- code cells' comments
#
# A parameters cell is what the exercises ask a learner to edit; its comments say what each value means, and
# the other code cells' comments say what a line does: the Korean notebook translates them all. Only the
# comment text changes: the code, every character outside a `#` comment, stays byte-identical (`code_only`
# compares exactly that). Directives (NBVAL_CHECK_OUTPUT, noqa, type: comments) are not text.

COMMENT_CONTEXT = "#comment"
_DIRECTIVE = re.compile(r"[A-Z][A-Z0-9_]+$|noqa\b|type:")


def _is_parameters(cell) -> bool:
    return cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", [])


def comments(source: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of every `#` comment's text (after "# ") in `source`, as offsets (tokenize)."""
    import io
    import tokenize

    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            start = starts[tok.start[0] - 1] + tok.start[1]
            lead = len(tok.string) - len(tok.string.lstrip("#").lstrip())
            if tok.string[lead:].strip() and not _DIRECTIVE.match(tok.string[lead:]):
                out.append((start + lead, start + len(tok.string), tok.string[lead:]))
    return out


def code_only(source: str) -> str:
    """`source` with every comment's text removed: what must be byte-identical between the languages."""
    for start, end, _text in reversed(comments(source)):
        source = source[:start] + source[end:]
    return source


def _translate_comments(source: str, translate) -> str:
    for start, end, text in reversed(comments(source)):
        source = source[:start] + translate(text) + source[end:]
    return source


def extract_package(package: Path = PACKAGE) -> Catalog:
    """Every string literal the package passes to `_()` or `N_()` (Babel's Python extractor)."""
    cat = _catalog(WORKSHOP)
    for filename, lineno, msg, comments, context in extract_from_dir(
        str(package),
        method_map=[("**.py", "python")],
        keywords=DEFAULT_KEYWORDS,
        comment_tags=("TRANSLATORS:",),
    ):
        cat.add(msg, locations=[(f"workshop/{filename}", lineno)], auto_comments=comments, context=context)
    return cat


def template(domain: Domain, notebooks: Path = NOTEBOOKS_DIR, package: Path = PACKAGE) -> Catalog:
    return extract_notebooks(notebooks) if domain.markdown else extract_package(package)


def read_catalog(path: Path) -> Catalog:
    if not path.is_file():
        return Catalog(locale=LANG)
    with path.open("rb") as f:
        return read_po(f, locale=LANG)


def write_catalog(cat: Catalog, path: Path) -> None:
    """Deterministic .po: fixed dates, no line numbers (moving a sentence must not touch the catalog), no
    wrap."""
    import io

    cat.creation_date = cat.revision_date = _EPOCH
    buf = io.BytesIO()
    write_po(buf, cat, width=0, include_lineno=False, ignore_obsolete=True, include_previous=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())


def update(
    locale_root: Path | None = None, notebooks: Path = NOTEBOOKS_DIR, package: Path = PACKAGE
) -> list[Path]:
    """Merge the English into each catalog: new messages empty, changed ones fuzzy with the old msgid kept."""
    written = []
    for domain, path, cat, tmpl in _catalogs(locale_root, notebooks, package):
        if not path.is_file():
            cat = _catalog(domain)
        cat.update(tmpl, update_creation_date=True)
        write_catalog(cat, path)
        written.append(path)
    return written


def _catalogs(
    locale_root: Path | None, notebooks: Path, package: Path
) -> Iterator[tuple[Domain, Path, Catalog, Catalog]]:
    """Per domain: its .po path, the catalog in it (translations) and the template (the English now)."""
    for domain in DOMAINS:
        path = _po(domain, locale_root)
        yield domain, path, read_catalog(path), template(domain, notebooks, package)


def _po(domain: Domain, locale_root: Path | None) -> Path:
    default = catalog_path(LANG, domain.name)
    return default if locale_root is None else locale_root / LANG / "LC_MESSAGES" / f"{domain.name}.po"


# ---------------------------------------------------------------- what a translation must keep


def _md_shape(text: str) -> tuple[list, Counter, Counter]:
    """Block structure (headings' levels, list items, fences with their code, tables' column counts), inline
    code spans and link targets of a markdown text (markdown-it-py, CommonMark with GFM tables)."""
    from markdown_it import MarkdownIt

    blocks: list = []
    code: Counter = Counter()
    links: Counter = Counter()
    cols = 0
    for tok in MarkdownIt("commonmark").enable("table").parse(text):
        if tok.type == "heading_open":
            blocks.append(tok.tag)
        elif tok.type in ("bullet_list_open", "ordered_list_open", "list_item_open", "blockquote_open", "hr"):
            blocks.append(tok.type)
        elif tok.type in ("fence", "code_block"):
            blocks.append((tok.type, tok.info, tok.content))
        elif tok.type == "tr_open":
            cols = 0
        elif tok.type in ("th_open", "td_open"):
            cols += 1
        elif tok.type == "tr_close":
            blocks.append(("row", cols))
        for child in tok.children or []:
            if child.type == "code_inline":
                code[child.content] += 1
            elif child.type in ("link_open", "image"):
                links[child.attrs.get("href") or child.attrs.get("src")] += 1
    return blocks, code, links


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CODE_SPAN = re.compile(r"`[^`]*`")


def _fields(text: str) -> Counter:
    try:
        return Counter(
            f"{{{n}{':' + s if s else ''}}}" for _, n, s, _ in string.Formatter().parse(text) if n is not None
        )
    except ValueError:
        return Counter({"<unbalanced braces>": 1})


_MONTHS = re.compile(
    r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b"
)
_MONTH_NUMBER = {m: str(i) for i, m in enumerate(_MONTHS.pattern[4:-4].split("|"), 1)}


def _numbers(text: str) -> Counter:
    """Digits outside code spans and {fields} (those are compared whole); an English month counts as its
    number, as Korean writes it (June 2025 = 2025년 6월)."""
    text = re.sub(r"\{[^{}]*\}", " ", _CODE_SPAN.sub(" ", text))
    text = _MONTHS.sub(lambda m: f" {_MONTH_NUMBER[m.group(1)]} ", text)
    return Counter(_NUMBER.findall(text))


def mismatches(english: str, korean: str, *, markdown: bool) -> list[str]:
    """What the translation changed that it must keep: numbers, inline code, {fields}, links, markdown
    shape."""
    out = []

    def diff(what: str, a: Counter, b: Counter) -> None:
        if a != b:
            out.append(
                f"{what} differ: missing {sorted((a - b).elements())}, added {sorted((b - a).elements())}"
            )

    diff("numbers", _numbers(english), _numbers(korean))
    if markdown:
        (eb, ec, el), (kb, kc, kl) = _md_shape(english), _md_shape(korean)
        if eb != kb:
            out.append(f"markdown structure differs: {eb} != {kb}")
        diff("inline code spans", ec, kc)
        diff("link targets", el, kl)
    else:
        diff("{fields}", _fields(english), _fields(korean))
        diff("inline code spans", Counter(_CODE_SPAN.findall(english)), Counter(_CODE_SPAN.findall(korean)))
    return out


# ---------------------------------------------------------------- Korean notebooks


def translate_notebook(path: Path, cat: Catalog):
    """The Korean notebook: the English one with markdown replaced by its (non-fuzzy) translation, code cells
    untouched, outputs and execution counts stripped (a Korean run makes its own)."""
    nb = copy.deepcopy(_read_nb(path))
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.strip():
            msg = cat.get(cell.source, context=f"{path.stem}:{cell.id}")
            if msg is not None and msg.string and not msg.fuzzy:
                cell.source = msg.string
        elif cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            context = f"{path.stem}:{cell.id}{COMMENT_CONTEXT}"

            def korean(text: str, context: str = context) -> str:
                msg = cat.get(text, context=context)
                return str(msg.string) if msg is not None and msg.string and not msg.fuzzy else text

            cell.source = _translate_comments(cell.source, korean)
    return nb


def _nb_text(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def generated(notebooks: Path = NOTEBOOKS_DIR, locale_root: Path | None = None) -> dict[str, str]:
    cat = read_catalog(_po(NOTEBOOKS, locale_root))
    return {p.name: _nb_text(translate_notebook(p, cat)) for p in english_notebooks(notebooks)}


def generate(
    notebooks: Path = NOTEBOOKS_DIR, out: Path = NOTEBOOKS_KO_DIR, locale_root: Path | None = None
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    texts = generated(notebooks, locale_root)
    for old in english_notebooks(out):
        if old.name not in texts:
            old.unlink()  # its English notebook is gone
    written = []
    for name, text in texts.items():
        target = out / name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


# ---------------------------------------------------------------- the check


def _where(msg, domain: Domain) -> str:
    if domain.markdown and msg.context:
        stem, _, cell = msg.context.partition(":")
        if cell.endswith(COMMENT_CONTEXT):
            return f"notebooks/{stem}.ipynb cell {cell.removesuffix(COMMENT_CONTEXT)} comment {msg.id[:50]!r}"
        return f"notebooks/{stem}.ipynb cell {cell}"
    locs = ", ".join(sorted({f for f, _ in msg.locations})) or "?"
    return f"{locs} {msg.id[:60]!r}"


def problems(
    notebooks: Path = NOTEBOOKS_DIR,
    package: Path = PACKAGE,
    out: Path = NOTEBOOKS_KO_DIR,
    locale_root: Path | None = None,
) -> list[str]:
    """Everything that keeps the Korean from matching the English, one line each, naming file and cell."""
    found = []
    for domain, po, cat, tmpl in _catalogs(locale_root, notebooks, package):
        name = str(po.relative_to(po.parents[3]) if locale_root is None else po)
        for msg in tmpl:
            if not msg.id:
                continue
            have = cat.get(msg.id, context=msg.context)
            if have is None:
                found.append(f"{_where(msg, domain)}: the English changed or is new; not in {name}")
            elif not have.string:
                found.append(f"{_where(msg, domain)}: untranslated in {name}")
            elif have.fuzzy:
                found.append(
                    f"{_where(msg, domain)}: fuzzy in {name} (the English changed; check the translation)"
                )
            else:
                found += [
                    f"{_where(msg, domain)}: {m}"
                    for m in mismatches(str(msg.id), str(have.string), markdown=domain.markdown)
                ]
        for msg in cat:
            if msg.id and tmpl.get(msg.id, context=msg.context) is None:
                found.append(f"{_where(msg, domain)}: stale in {name}, no longer in the English")
    texts = generated(notebooks, locale_root)
    for name, text in texts.items():
        target = out / name
        if not target.is_file():
            found.append(f"{out.name}/{name}: missing")
        elif target.read_text(encoding="utf-8") != text:
            found.append(f"{out.name}/{name}: out of date with notebooks/{name} and the catalog")
    found += [
        f"{out.name}/{p.name}: no English notebook" for p in english_notebooks(out) if p.name not in texts
    ]
    return found
