"""What a Korean run prints is Korean (issue #48): the functions the Korean chapters call to print, run with
WORKSHOP_LANG=ko, print no English prose (a run of five ordinary English words) outside the allowed kinds:

- identifiers: code spans, flags, paths, env vars, table column names (a table's header line);
- data-sheet and price citations, quoted as published (the `source` of GPUS, LINKS, PRICES, data-sheet Rates);
- DeepSpeed's own log lines (the original workshop's memory log: reconcile.ORIGINAL_STAGES_GIB);
- CRD/CEL messages (the API server's words; none among the functions below).
"""

from __future__ import annotations

import re

import pytest

from workshop import lang

# five or more ordinary words in a row (a capital only at the start of a word, letters and apostrophes)
_PROSE = re.compile(r"\b(?:[A-Za-z][a-z']+[ ,;:]{1,2}){4,}[A-Za-z][a-z']+\b")
_CODE = re.compile(r"`[^`]*`|https?://\S+|\S+/\S+|--[\w-]+")


def _allowed() -> list[str]:
    from workshop.plan import catalog, rates, reconcile, topology

    cited = [g.source for g in rates.GPUS.values()] + [lk.source for lk in topology.LINKS.values()]
    cited += [p.source for p in catalog.PRICES.values()] + [p.source for p in catalog._PER_VCPU.values()]
    cited += [s.gbytes_per_s.source for s in rates.STORAGE.values() if s.gbytes_per_s.kind == "data sheet"]
    cited += [rates.DDR_GBYTES_PER_S_PER_CORE.source]
    return cited + list(reconcile.ORIGINAL_STAGES_GIB)


def english_prose(lines: list[str], allowed: list[str]) -> list[str]:
    """The lines holding an English run that no allowed text contains."""
    found = []
    for line in lines:
        text = _CODE.sub(" ", line)
        for m in _PROSE.finditer(text):
            run = m.group().strip(" ,;:")
            if not any(run in a for a in allowed):
                found.append(f"{run!r} in {line.strip()[:160]!r}")
    return found


def _printed() -> dict[str, list[str]]:
    """What the chapters print, by where it comes from (each a list of lines)."""
    from workshop.errors import WorkshopError
    from workshop.experiments import debugging, precision
    from workshop.experiments.bench import format_rows, summary_rows
    from workshop.experiments.ceiling import format_table, load, rows
    from workshop.experiments.comms import offload_on_cpu
    from workshop.experiments.loading import checkpoint
    from workshop.k8s import teardown
    from workshop.launch import netsim
    from workshop.plan import cost, hardware, models, options, reconcile
    from workshop.report import interpret

    out: dict[str, list[str]] = {}
    plans = cost.rank(options.Options(model="llama-3-8b", tokens=1e9, source="moto"))
    cpu = next(p for p in plans if p.device == "cpu")
    out["01 rates' sources"] = [v for p in (plans[0], cpu) for v in p.sources.values()]
    stages = reconcile.original_comparison()
    out["01 memory stages"] = [str(r["stage"]) for r in stages]
    out["04 log reading"] = reconcile.original_log_reading()
    out["04 precision line"] = [hardware.resolve_precision("auto")[1], hardware.resolve_precision("fp32")[1]]
    out["04 precision.report"] = precision.report(steps=4).splitlines()[1:]  # [0]: column names
    out["04 switches"] = list(debugging.SWITCHES.values())
    res = load()
    out["04 ceiling"] = interpret.ceiling(res)
    out["04 ceiling table"] = format_table(rows(res)).splitlines()[2:]
    out["04 bench summary"] = format_rows(summary_rows()).splitlines()[2:]
    out["04 offload on CPU"] = [offload_on_cpu()]
    out["05 models.describe"] = [models.resolve_source(m).describe() for m in ("tiny", "llama-3-8b")]
    out["05 netsim mode"] = [netsim.choose_mode(m)[1] for m in ("auto", "loopback")]
    out["05 teardown"] = teardown.offline_plan().splitlines()
    errors = []
    for bad in (0, 10**6):
        try:
            checkpoint.check_world_size(bad)
        except WorkshopError as exc:
            errors.append(str(exc))
    out["03 error demonstrations"] = errors
    from workshop.book import sentences
    from workshop.plan import topology, traffic, zero3

    rows_06 = traffic.original_comparison(overlap=0.0)
    out["06 printed lines and titles"] = [
        *(sentences.original_run(r) for r in topology.ORIGINAL_RUNS),
        sentences.original_sources(),
        sentences.bytes_by_stage_title(),
        sentences.step_vs_bandwidth_title(rows_06[0].compute_s),
        *(sentences.measured_vs_model(r.label, r.measured_s, r.predicted_s, r.error) for r in rows_06),
        *sentences.p4d_checks(traffic.original_checks(rows_06)),
        *(sentences.overlap_line(s) for s in traffic.overlap_sweep()),
        *(sentences.zero3_calls(m, zero3.zero3_calls(m)) for m in ("tiny", "llama-3-8b")),
    ]
    from types import SimpleNamespace

    loading = {
        "keep_gb": 1.0,
        "peak_rank0_gb": 20.1,
        "peak_other_gb": 5.2,
        "partitioned": True,
        "per_node_gb": 35.7,
        "file_gb": 5.0,
    }
    out["03 and 04 printed lines"] = [
        sentences.host_line("AMD EPYC", 2, 25.0, False),
        sentences.checkpoint_line(SimpleNamespace(numel=8e6, bytes=1.6e7, dtype="bf16", shards=["a", "b"])),
        sentences.pitfall_partition("fix", {**loading, "local_numel": 4, "full_numel": 8}),
        sentences.lcmu_peak(1.5),
        sentences.planner_loading("zero3", 2, loading),
        sentences.planner_loading_node("zero3-stream", loading),
        sentences.training_line(
            {
                "first_loss": 9.0,
                "final_loss": 7.0,
                "steps": [1, 2],
                "tokens_per_s_median": 3400.0,
                "peak_rss_gb_per_rank": [0.9],
            }
        ),
        sentences.partition_line(
            {"params": [1], "total_numel": 8, "world_size": 2, "local_numel_per_rank": [4, 4]}
        ),
    ]
    return out


@pytest.fixture(scope="module")
def korean_prints():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKSHOP_LANG", "ko")
        yield _printed()


def test_the_korean_chapters_print_no_english_prose(korean_prints):
    allowed = _allowed()
    found = {where: bad for where, lines in korean_prints.items() if (bad := english_prose(lines, allowed))}
    assert all(korean_prints.values()) and not found, found


def test_the_check_finds_english_prose_and_passes_the_allowed_kinds():
    allowed = _allowed()
    assert english_prose(["요약: the recipe already runs fp32 because this host has no native math"], allowed)
    assert not english_prose(
        ["레시피는 bf16으로 돕니다 (`python -m workshop bench ceiling --levers a,b`)"], allowed
    )
    assert not english_prose(["After initializing optimizer states: 20.40 GiB"], allowed)  # DeepSpeed's line
    cite = next(a for a in allowed if "datasheet" in a)
    assert not english_prose([f"0.4 (데이터시트: {cite})"], allowed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKSHOP_LANG", "en")  # the same functions in English do print prose: the check can fail
        assert english_prose(_printed()["05 teardown"], allowed)
    assert lang.language() in ("en", "ko")


def _code_cell_prose() -> dict[str, list[str]]:
    """English prose in the string literals of the English notebooks' code cells (a code cell is the same
    bytes in both languages), by notebook; assertion messages (shown only when a check fails) left out."""
    import ast

    import nbformat

    from workshop.book import i18n

    found: dict[str, list[str]] = {}
    for path in i18n.english_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
                continue
            tree = ast.parse(cell.source)
            skip = {
                id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) and a.msg for n in ast.walk(a.msg)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                    for m in re.finditer(
                        r"\b(?:[A-Za-z][a-z']+[ ,;:]{1,2}){3,}[A-Za-z][a-z']+\b", node.value
                    ):
                        found.setdefault(path.name, []).append(f"{cell.id}: {m.group()!r}")
    return found


def test_no_code_cell_prints_an_english_sentence_and_readme_ko_says_what_is_korean():
    """What a code cell prints comes from the package (`book/sentences.py`, through `_()`), never from an
    English literal in the cell; README.ko.md says what is Korean and what stays English, naming this test."""
    assert _code_cell_prose() == {}
    from workshop.paths import REPO

    ko = (REPO / "README.ko.md").read_text(encoding="utf-8")
    section = ko[ko.index("## 한국어로 보기") : ko.index("```")]
    for said in ("모든 코드 셀의 주석", "DeepSpeed", "CRD", "데이터시트", "tests/book/test_korean_prints.py"):
        assert said in section, said
