"""What a Korean run prints is Korean (issue #48): the functions the Korean chapters call to print, run with
WORKSHOP_LANG=ko, print no English prose outside the kinds `workshop.book.i18n_prose` allows (identifiers,
rendered files, data-sheet and price citations, CRD/CEL messages, library log lines); `workshop run --lang ko`
reads every executed chapter with the same check (tests/whole/test_notebooks.py runs chapter 02 that way).
"""

from __future__ import annotations

import re

import pytest

from workshop import lang
from workshop.book.i18n_prose import allowed, english_prose, notebook_lines, problems


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
    out.update(_printed_by_the_later_reads())
    return out


def _printed_by_the_later_reads() -> dict[str, list[str]]:
    """What the second read of a Korean run found English (the efficiency line's parts, the clock's source,
    chapter 02's release notes and rule counts, `wrote`, the waits' `not Ready`, the chapters' errors)."""
    from workshop.book import sentences
    from workshop.errors import WorkshopError
    from workshop.experiments.loading import checkpoint
    from workshop.k8s import crds, trainjob, waits
    from workshop.k8s.validate import rule_counts
    from workshop.plan import gemm, hardware, memory

    out: dict[str, list[str]] = {}
    peak = hardware.peak_tflops("avx512_bf16_zen5", 2, 2.6)
    sources = [
        hardware.XEON_REFERENCE["clock_source"],
        "/proc/cpuinfo 'cpu MHz' (the clock the hypervisor reports)",
    ]
    out["01 over the peak"] = [gemm.over_peak(peak.tflops * 1.5, peak, s) for s in sources]
    out["01 memory table"] = memory.plan_memory("llama-3-8b", world_size=4).explain().splitlines()
    out["02 releases"] = [
        line
        for r in crds.releases("karpenter")
        for line in sentences.release_check(r.label, [], r.note).splitlines()
    ]
    out["02 rule counts"] = [sentences.rule_count(k, row) for k, row in rule_counts().items()]
    out["02 and 05 lines"] = [
        sentences.wrote("/tmp/x.yaml"),
        sentences.trainjob_form("2.1.0", "2.3.0", []),
        sentences.valid_against("2.3.0", True),
        sentences.s3_outputs("s3://bucket/out", "trainer"),
        sentences.cluster_result("Failed", []),
    ]
    out["02 waits"] = [
        waits.diagnose("NodePool", "cpu-amx", None, "Ready", 30),
        waits.diagnose("NodePool", "cpu-amx", {"status": {}}, "Ready", 30),
        waits.diagnose(
            "NodePool",
            "cpu-amx",
            {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
            "Ready",
            30,
        ),
        waits.diagnose(
            "NodePool", "cpu-amx", {"status": {"conditions": [{"type": "X", "status": "True"}]}}, "Ready", 30
        ),
    ]
    errors = []
    for bad in ("/no/such/checkpoint", __file__):
        try:
            checkpoint.verify_checkpoint(bad)
        except WorkshopError as exc:
            errors.append(str(exc))
    job = trainjob.TrainJobSpec("x", "img", [], 1, 1, capabilities=["IPC_LOCK"])
    try:
        job.to_dict("2.1.0")
    except WorkshopError as exc:
        errors.append(str(exc))
    out["03 and 05 errors"] = errors
    from workshop.experiments import slice as slice_bench

    cfg = slice_bench.SliceConfig(layers=1, ranks=2, threads=1, out_dir="/tmp/unused")
    out["04 slice memory"] = [slice_bench.check_memory(cfg, "bf16", gib * 2**30).note for gib in (16, 200)]
    return out


@pytest.fixture(scope="module")
def korean_prints():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKSHOP_LANG", "ko")
        yield _printed()


def test_the_korean_chapters_print_no_english_prose(korean_prints):
    found = {where: bad for where, lines in korean_prints.items() if (bad := english_prose(lines))}
    assert all(korean_prints.values()) and not found, found


# What the bilingual reads found in a Korean run (issue #48 and the read after it), as printed: each is caught
READER_FOUND = [
    "efficiency  0.087 (측정: compute = forward+backward 5.81 s less the gradient reduce 1.88 s of the step)",
    "스레드 확장 계수 0.35(범위 0.33-0.43: 0.35 of linear at 23 cores (range 0.33-0.43))",
    "이는 계산에 쓴 2.596 GHz보다 높습니다(/proc/cpuinfo 'cpu MHz' (the clock the hypervisor reports))",
    "network    EFA 위의 NCCL: 디바이스 32개 x 0.8 (the EC2 catalog's network performance for p5.48xlarge)",
    "                  Kubernetes 1.29-1.34 (Karpenter's compatibility matrix; nothing newer than 1.34)",
    "EC2NodeClass              54 rules:  54 evaluated, 0 skipped (oldSelf)",
    "wrote /tmp/out/karpenter-cpu-amx-r7i.4xlarge.yaml",
    "[FAIL] node cpu-amx-1: NotReady, not Ready (kubelet stopped posting node status)",
    "valid against Trainer 2.3.0: True",
    "WorkshopError: Trainer 2.1.0 cannot add container capabilities ['IPC_LOCK'] from a TrainJob",
    "     10gbit: ok in 20 s, median step 0.6287 s",
    "total per rank           42.16 GiB",
]


def test_the_check_finds_english_prose_and_passes_the_allowed_kinds():
    assert english_prose(["요약: the recipe already runs fp32 because this host has no native math"])
    missed = [line for line in READER_FOUND if not english_prose([line])]
    assert not missed, missed
    kept = [
        "레시피는 bf16으로 돕니다 (`python -m workshop bench ceiling --levers a,b`)",  # code
        "After initializing optimizer states: 20.40 GiB",  # DeepSpeed's own memory log
        # the API server's CEL message
        "NodePool/cpu-amx (document 1): spec: operator 'In' must have a value [rule: self.all(x, x.y)]",
        "    # Host-level setup only. Python and DeepSpeed live in the training image",  # a rendered file
        'printf %s "$HF_TOKEN" | kubectl create secret generic hf-token --from-file=token=/dev/stdin',
        "check                      predicted   measured unit        error target  ok",  # a table's header
        "-----------------------------------------------------------------------------",
        "per node: cpu=14 memory=74Gi /dev/shm=32Gi threads/rank=7",  # a short label before values
        "{'clock_source': \"/proc/cpuinfo 'cpu MHz' (the clock the hypervisor reports)\"}",  # a Python value
    ]
    assert not english_prose(kept), english_prose(kept)
    cite = next(a for a in allowed() if "datasheet" in a)
    assert not english_prose([f"0.4 (데이터시트: {cite})"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKSHOP_LANG", "en")  # the same functions in English do print prose: the check can fail
        assert english_prose(_printed()["05 teardown"])
    assert lang.language() in ("en", "ko")


def test_an_executed_korean_notebook_is_read_cell_by_cell():
    """`workshop run --lang ko` reads what each cell printed (streams, HTML, errors) with the same check."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", id=f"c{i}") for i in range(3)]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="wrote /tmp/a.yaml\n")]
    nb.cells[1].outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<p>노드 4개: &#x27;a&#x27;</p><pre>rank당 합계  4 GiB</pre>",
                "text/plain": "x",
            },
        )
    ]
    nb.cells[2].outputs = [
        nbformat.v4.new_output("error", ename="WorkshopError", evalue="the file is missing")
    ]
    assert [lines for _id, lines in notebook_lines(nb)][1] == [
        "",
        "노드 4개: 'a'",
        "",
        "rank당 합계  4 GiB",
    ]
    found = problems(nb)
    assert [p.split(":")[0] for p in found] == ["cell c0", "cell c2"], found


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
            for text in _printed_literals(tree):
                found.setdefault(path.name, []).append(f"{cell.id}: printed {text!r}")
    return found


def _printed_literals(tree) -> list[str]:
    """The words a print() or say() call of a cell prints from its own literals (a `print("wrote", path)`,
    an f-string's text around its fields, either branch of a conditional), where they are more than a label
    before a value (`per node:`, `mode: `, ` memory=`, `| AMX:`) or a file name."""
    import ast

    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) in ("print", "say")):
            continue
        parts: list[ast.AST] = list(call.args)
        while parts:
            node = parts.pop()
            if isinstance(node, ast.JoinedStr):
                parts += [v for v in node.values if isinstance(v, ast.Constant)]
            elif isinstance(node, ast.IfExp):
                parts += [node.body, node.orelse]
            elif isinstance(node, ast.BinOp):
                parts += [node.left, node.right]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = re.sub(r"[\w./-]*\.(?:png|json|yaml|md)\b|\S*/\S*", " ", node.value)
                text = re.sub(r"\|?\s*[\w /]{1,24}(?::\s*|=)", " ", text)  # labels before a value
                if re.search(r"[A-Za-z]{3,}", text):
                    found.append(node.value)
    return found


def test_no_code_cell_prints_an_english_sentence_and_readme_ko_says_what_is_korean():
    """What a code cell prints comes from the package (`book/sentences.py`, through `_()`), never from an
    English literal in the cell; README.ko.md says what is Korean and what stays English, naming this test."""
    assert _code_cell_prose() == {}
    from workshop.paths import REPO

    ko = (REPO / "README.ko.md").read_text(encoding="utf-8")
    section = ko[ko.index("## 한국어로 보기") : ko.index("```")]
    for said in (
        "모든 코드 셀의 주석",
        "DeepSpeed",
        "CRD",
        "데이터시트",
        "workshop/book/i18n_prose.py",
        "tests/book/test_korean_prints.py",
    ):
        assert said in section, said


def test_korean_labels_keep_printed_tables_in_line(monkeypatch):
    """A Hangul syllable takes two columns: the validation table and the memory table stay aligned in Korean
    (padded by display width, `tables.ljust`), as they are in English."""
    from workshop import tables
    from workshop.plan import costcheck, memory

    monkeypatch.setenv("WORKSHOP_LANG", "ko")
    lines = costcheck.format_checks(costcheck.p4d_rows() + costcheck.original_gpu_rows()).splitlines()
    korean = [line for line in lines[2:] if re.search("[가-힣]", line)]
    assert korean, lines  # the planner's rows carry a Korean label
    # the unit column starts at the same display column on every row, the header's included
    starts = {tables.width(line[: line.index(" s/step")]) for line in lines[2:]}
    assert len(starts) == 1, lines
    total = memory.plan_memory("llama-3-8b", world_size=4).explain().splitlines()
    rows = [m for line in total if (m := re.match(r"(\S+(?: \S+)*?)\s{2,}(\d+\.\d\d) GiB", line))]
    gib = {tables.width(m.string[: m.end(2)]) for m in rows}
    assert len(gib) == 1 and any(re.search("[가-힣]", line) for line in total), total
    assert tables.width("rank당 합계") == 11 and tables.ljust("합계", 6) == "합계  "
