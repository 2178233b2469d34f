"""English prose in what a Korean run prints (issue #48): `workshop run --lang ko` reads every executed
chapter with `problems` and lists what it finds in out/index.md; tests/book/test_korean_prints.py
fails on it.

A Korean run may print English only of these kinds (README.ko.md and GLOSSARY.md list them):
- identifiers: code spans, commands, flags, paths, URLs, quoted values, `key=value`, table column names (a
  table's header line), one- or two-word labels before a value (`per node:`, `mode:`);
- the contents of rendered files (a manifest's YAML and its comments: the same bytes in both languages) and
  Python values shown as such (a dict, a list);
- data-sheet and price citations, quoted as published, and the machine names stored results carry, quoted as
  recorded (`allowed()`);
- the API server's CRD/CEL messages (a line naming its `[rule: ...]`), library log lines and errors
  (DeepSpeed's own memory log, `reconcile.ORIGINAL_STAGES_GIB`; torch's and DeepSpeed's timestamped lines,
  warnings and exceptions, as chapter 03 shows them happen) and Python source printed as such (chapter 04).
Anything else English is prose: a run of three ordinary words, an English function word (the, of, not, ...)
inside a Korean sentence, or a line that opens with an English verb (`wrote ...`, `ok in ...`).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable

# three or more ordinary words in a row (a capital only at the start of a word, letters and apostrophes)
_RUN = re.compile(r"\b(?:[A-Za-z][a-z']+[ ,;:]{1,2}){2,}[A-Za-z][a-z']+\b")
# what is never prose: code spans, URLs, paths, flags, quoted values, key=value, identifiers with _ . digits
_CODE = re.compile(
    r"`[^`]*`|https?://\S+|\S+/\S+|--[\w-]+|'[^']*'|\"[^\"]*\"|\S+=\S*|\b\w*[_\d]\w*\b|\b\w+(?:\.\w+)+\b"
)
# English words that are prose wherever they stand (not units, not kept terms, not column names)
_FUNCTION = re.compile(
    r"(?<![\w-])(?:the|of|and|with|is|are|was|were|not|from|than|less|beyond|into|its|their|this|that|which|"
    r"when|where|only|but|because|been|has|have|will|would|cannot|does|did|there|these|those|what|how|why|"
    r"against)(?![\w-])"
    # verbs in lower case (a capitalised Failed or Applied is a status the API server reports)
    r"|(?<![\w-])(?-i:wrote|evaluated|skipped|parsed|applied|connected|deleted|created|saved|failed)(?![\w-])",
    re.IGNORECASE,
)
# a line that opens with an English verb or verdict (after its indentation and a short label)
_OPENER = re.compile(
    r"^\s*(?:[\w./ -]{1,30}:\s+)?(?:wrote|ok in|failed|connected|applied|deleted|created|saved|skipped|"
    r"valid against|not Ready|no such)\b"
)
# words GLOSSARY.md keeps in English in Korean prose: a list of them is not an English sentence
_KEPT = re.compile(
    r"\b(?:attention|norm|activations?|loss|optimizer|gradients?|checkpoints?|compute|comm|bound|cap|"
    r"wall time|pods?|taints?|tolerations?|requests|limits?|claim|global batch|fine-tuning|master|all-reduce|"
    r"all-gather|reduce-scatter|broadcast|collective|transformers|on-demand|spot|world size)\b"
    # a library's own error quoted inside a sentence of ours (safetensors on a corrupt shard)
    r"|Error while deserializing header: [\w ]+"
)
_HANGUL = re.compile(r"[가-힣]")
# whole lines that are not the package's sentences
_NOT_PROSE = re.compile(
    r"^\s*[+\- ]?\s*#"  # a comment inside a rendered file (YAML, a shell script, a diff of them)
    r"|\[rule: "  # the API server's CRD/CEL message, with the rule it quotes
    # a command, as typed
    r"|^\s*[+\-]?\s*(?:\$ )?(?:kubectl|docker|printf|aws|python|pip|git|eksctl|helm|curl|fi_info|torchrun)\b"
    r"|^\s*[{\[(]['\"\d{\[(]|^\s*'\w+': |^\s*<|^\s*\w+\("  # a Python value: a dict, a list, a Figure(...)
    # a library's log line (DeepSpeed, torch: a timestamp, a rank, a level) or warning
    r"|^\s*\[(?:\d{4}-\d\d-\d\d|rank\d+|INFO|WARNING)|^\s*\d{4}-\d\d-\d\d[ T]\d\d:|\w+Warning\b"
    # a library's exception as it happens (chapter 03 shows the original workshop's pitfalls), not ours
    r"|^\s*(?!Workshop)[A-Z]\w*(?:Error|Exception)\s?: "
)
_RULER = re.compile(r"^\s*[-=─|+ ]{8,}\s*$")


@functools.cache
def allowed() -> tuple[str, ...]:
    """Texts quoted as published or recorded: data-sheet and price citations, DeepSpeed's memory log of the
    original workshop, the machine names stored results carry."""
    from workshop.plan import catalog, rates, reconcile, topology

    cited = [g.source for g in rates.GPUS.values()] + [lk.source for lk in topology.LINKS.values()]
    cited += [p.source for p in catalog.PRICES.values()] + [p.source for p in catalog._PER_VCPU.values()]
    cited += [s.gbytes_per_s.source for s in rates.STORAGE.values() if s.gbytes_per_s.kind == "data sheet"]
    cited += [rates.DDR_GBYTES_PER_S_PER_CORE.source]
    return tuple(cited + list(reconcile.ORIGINAL_STAGES_GIB) + _recorded_machines())


def _recorded_machines() -> list[str]:
    """The machine descriptions stored results carry (`machine.cpu_model`, `machine.date`), quoted as
    recorded: an outside measurement's "Intel Xeon with AMX (2-vCPU VM; model string not reported)"."""
    import json

    from workshop.paths import RESULTS_DIR

    found = []
    for path in sorted(RESULTS_DIR.glob("*.json")):
        try:
            machine = json.loads(path.read_text(encoding="utf-8")).get("machine")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(machine, dict):
            found += [str(machine[k]) for k in ("cpu_model", "date") if isinstance(machine.get(k), str)]
    return found


def _header(line: str, following: str) -> bool:
    """A table's header line: the line above a ruler, or columns of single words set apart by wide gaps."""
    if _RULER.match(following):
        return True
    if (
        re.fullmatch(r"[A-Za-z_/%() -]+", line.strip())
        and "  " in line.strip()
        and re.search(r"\d", following)
    ):
        return True  # column names over a row of numbers
    cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
    return len(cells) >= 3 and all(" " not in c for c in cells) and not _HANGUL.search(line)


def english_prose(lines: Iterable[str], cited: Iterable[str] = ()) -> list[str]:
    """The English prose in `lines` (each finding: the English, then the line it is in), outside the kinds
    listed in the module's docstring; `cited`: texts quoted as published (default `allowed()`)."""
    cited = tuple(sorted(cited or allowed(), key=len, reverse=True))  # the longest quote first
    lines = list(lines)
    found = []
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.strip() or _NOT_PROSE.search(line) or _header(line, following):
            continue
        for quote in cited:
            line = line.replace(quote, " ")
        text = _KEPT.sub("|", _CODE.sub(" ", line))
        hits = [m.group().strip(" ,;:") for m in _RUN.finditer(text)]
        hits += [m.group() for m in _FUNCTION.finditer(text) if not any(m.group() in run for run in hits)]
        opener = _OPENER.match(text)
        if opener:
            hits.append(opener.group().strip())
        found += [f"{hit!r} in {line.strip()[:160]!r}" for hit in dict.fromkeys(hits)]
    return found


def notebook_lines(nb) -> list[tuple[str, list[str]]]:
    """What an executed notebook printed, per code cell (its id and the lines of its text outputs, error
    messages included; markup stripped from HTML)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines: list[str] = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                lines += [f"{o.get('ename')}: {o.get('evalue')}"]
                continue
            data = o.get("data", {})
            text = o.get("text") or data.get("text/markdown") or data.get("text/html") or ""
            if not text and "image/png" not in data:
                text = data.get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if re.match(r"(?:def|class|async def) \w+", text):
                continue  # Python source shown as such (chapter 04 prints the training loop's core)
            text = re.sub(r"(?s)<style.*?</style>", "", text)
            text = re.sub(r"(?i)<br\s*/?>|</?(?:p|pre|div|tr|li|h\d)\b[^>]*>", "\n", text)
            lines += html.unescape(re.sub(r"<[^>]+>", "", text)).splitlines()
        out.append((cell.get("id", "?"), lines))
    return out


def problems(nb) -> list[str]:
    """English prose an executed Korean notebook printed, each with the cell it came from."""
    return [f"cell {cid}: {p}" for cid, lines in notebook_lines(nb) for p in english_prose(lines)]
