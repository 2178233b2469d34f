"""Issue 49: the mechanical read of executed notebooks (`workshop run` applies nbcheck.truth_problems to every
chapter it ran), on small synthetic notebooks, and the package's own sentences read by it: a verdict from one
round, a percentage after a refusal, a stored figure without its date."""

from __future__ import annotations

import nbformat
import pytest

from workshop.book import nbcheck
from workshop.experiments import ceiling, debugging
from workshop.experiments.ceiling import result
from workshop.report import interpret
from workshop.report.verdict import MIN_ROUNDS, compare, rejudge


def _nb(*printed: str):
    nb = nbformat.v4.new_notebook()
    for text in printed:
        cell = nbformat.v4.new_code_cell("print(...)")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    return nb


def test_each_kind_is_found_and_a_true_sentence_passes():
    bad = _nb(
        "workbook recipe beats without torch.compile by x1.40, one round\n",
        "The step is between 20% and 41%: no single share can be read from this run\n"
        "  without torch.compile: 24%; spread 7%\n",
        "stored result, measured on an AMX Xeon\n",
        "[round 1] recipe: 290 tokens/s\n[round 1] no_compile: 222 tokens/s\n"
        "  without torch.compile: workbook recipe beats without torch.compile by x1.40 (1.35-1.48)\n",
    )
    got = nbcheck.truth_problems(bad)
    assert [p.split(": ", 2)[1] for p in got] == [
        "a verdict from one round",
        "a single percentage after a refusal",
        "a stored figure without its date",
        "a verdict from one round",
    ], got
    good = _nb(
        "recipe vs without torch.compile: x1.40 (range 1.35-1.48 in tokens/s), one round: no verdict\n",
        "no single share can be read from this run (+43%, more than the 10% this workbook trusts)\n"
        "  without torch.compile: between 18% and 31%; spread 7%\n",
        "stored result, measured on an AMX Xeon, 2 CPUs, 2026-11-25\n",
        "| benchmark | stored value | stored: measured on |\n|---|---|---|\n"
        "| gemm | 35.8 % | Xeon, 2026-11-25 |\n",
        "  without torch.compile: 24%\n",  # a new cell: the refusal was the previous cell's
        "no stored result: run `python -m workshop bench ceiling`\n",
    )
    assert nbcheck.truth_problems(good) == []


def _result(drift: float, rounds: int) -> dict:
    """A ceiling result (recipe and one lever, summed up as `bench ceiling` does) whose ceiling moved by
    `drift` in every one of `rounds` rounds."""
    ceil = [
        {"round": r, "tflops": 3e-3, "start": {"tflops": 3e-3}, "end": {"tflops": 3e-3 * (1 + drift)}}
        for r in range(rounds)
    ]

    def runs(tps):
        return [
            {"tokens_per_s": tps, "step_time_s": 1.0, "flops_per_token": 1e6, "model_tflops": tps * 1e-6,
             "final_loss": 1.0, "steps": 4, "step_tokens_per_s": [tps - 10, tps, tps + 10]}
            for _ in range(rounds)
        ]  # fmt: skip

    recipe, lever = runs(1000.0), runs(700.0)
    labels = ("without torch.compile", "workbook recipe")
    levers = {
        "recipe": {"label": labels[1], "about": "", "base": None, "status": "measured",
                   **result.summarize_lever(recipe, ceil, {}, "bf16", None)},
        "no_compile": {"label": labels[0], "about": "", "base": "recipe", "status": "measured",
                       **result.summarize_lever(lever, ceil, {}, "bf16", recipe, labels)},
    }  # fmt: skip
    return {
        "config": {"micro_batch": 1, "seq_len": 8, "nproc": 1, "rounds": rounds, "model": "tiny"},
        "machine": {"cpu_model": "Test CPU"},
        "isa_path": "AMX-bf16",
        "precision": "bf16",
        "ceilings": {"8xbf16": ceil},
        "levers": levers,
    }


def test_chapter_04_never_names_a_winner_from_one_round_nor_a_share_after_a_refusal():
    """Issue 49's chapter 04: one sequential round with a ceiling that fell 43%: the numbers, no verdict, and
    every lever's share only as a range; the same lever over MIN_ROUNDS rounds is a verdict."""
    said = interpret.ceiling(_result(-0.43, 1))
    assert "no single share can be read" in said[0] and "one round: no verdict" in said[1]
    assert "between" in said[1] and nbcheck.truth_problems(_nb("\n".join(said))) == []
    row = ceiling.rows(_result(-0.43, 1))[1]
    assert row["verdict"] == "one round: no verdict" and not row["share_clear"] and not row["clear"]
    assert "a range only" in ceiling.format_table(ceiling.rows(_result(-0.43, 1)))
    steady = interpret.ceiling(_result(0.0, MIN_ROUNDS))
    assert "workbook recipe beats without torch.compile by x1.43" in steady[1], steady


def test_a_stored_verdict_is_judged_again_by_todays_rule():
    """The stored word ("costs") is never printed: the runs are judged now, where they were measured; a
    result that kept no runs is said to be beyond re-judging, with no verdict word."""
    res = _result(0.0, MIN_ROUNDS)
    res["measured_at"] = "2026-11-25 05:11:02"
    res["levers"]["no_compile"]["runs"] = [
        {**r, "tokens_per_s": t} for r, t in zip(res["levers"]["no_compile"]["runs"], (990.0, 1040.0))
    ]
    word, v = rejudge(res, "no_compile", interpret.measured_on(res))
    assert word == "within noise" and v is not None and "Test CPU" in v.sentence
    assert ceiling.rows(res)[1]["verdict"] == "within noise"
    del res["levers"]["no_compile"]["runs"]
    word, v = rejudge(res, "no_compile")
    assert v is None and "cannot be re-judged" in word
    assert not any(w in word for w in ("costs", "pays", "beats"))


def test_one_round_of_the_debug_checks_is_no_verdict_and_more_rounds_are():
    s = debugging.summarize("")
    s.samples, s.plain_samples = [900.0, 910.0, 905.0], [1400.0, 1420.0, 1410.0]
    assert nbcheck.truth_problems(_nb(debugging.report(s))) == []
    assert "one round: no verdict" in debugging.report(s)
    s.rounds = MIN_ROUNDS
    assert "checks off beats checks on" in debugging.report(s)
    assert not compare([2.0, 2.1], [1.0, 1.1], a_label="a", b_label="b", paired=True, rounds=1).clear


def test_a_stored_ceiling_figure_says_stored_machine_and_date(tmp_path, monkeypatch):
    titles = []
    monkeypatch.setattr(ceiling.table, "plot_ceiling", lambda rows, path, **kw: titles.append(kw["title"]))
    res = _result(0.0, MIN_ROUNDS)
    ceiling.figure(res, tmp_path / "live.png")
    res["measured_at"] = "2026-11-25 05:11:02"
    ceiling.figure(res, tmp_path / "stored.png")
    assert "stored" not in titles[0] and titles[1].startswith("stored result, measured on Test CPU")
    assert "2026-11-25" in titles[1]


def test_a_nodes_loading_total_counts_the_mapped_file_once():
    """Chapter 03 says the page cache holds the file once per node: its per-node total must too."""
    from workshop.experiments import loading

    meta = loading.planner_prediction("llama-3-8b", 4, "meta", shard_bytes=int(5e9))
    file = meta["file_gb"]
    assert file > 10 and meta["per_node_gb"] == pytest.approx(4 * meta["peak_other_gb"] - 3 * file)
    z3 = loading.planner_prediction("llama-3-8b", 4, "zero3", shard_bytes=int(5e9))
    assert z3["per_node_gb"] == pytest.approx(z3["peak_rank0_gb"] + 3 * z3["peak_other_gb"])


def test_a_gpu_plans_network_cites_its_own_catalog_entry():
    """A p5en plan's EFA line cited the p4d data sheet; it cites the p5en's own catalog entry."""
    from workshop.plan import cost, options

    plans = cost.rank(options.Options(model="llama-3-8b", tokens=1e8, source="moto"))
    said = next(p.sources["network"] for p in plans if p.label.endswith("p5en.48xlarge"))
    assert "p5en.48xlarge" in said and "p4d" not in said


def test_the_bf16_headline_carries_its_range_over_threads_and_sizes():
    """Chapter 01 said "x9.11" from its 1-thread cell while 2 threads gave x4.78: the range goes beside it."""
    from workshop.book import sentences
    from workshop.plan import gemm, hardware

    d = hardware.detect(probe_onednn=False)
    cells = [
        gemm.GemmResult(256, "bf16", 1, [1.0, 1.01, 0.99]),
        gemm.GemmResult(256, "fp32", 1, [0.11, 0.111, 0.109]),
        gemm.GemmResult(256, "bf16", 2, [1.9, 1.91, 1.89]),
        gemm.GemmResult(256, "fp32", 2, [0.4, 0.41, 0.39]),
    ]
    s = gemm.summarize(d, cells)
    assert "x4.75-x9.09 over the 1/2 thread(s) x n = 256 measured" in interpret.gemm(s, d, cells)
    summary = sentences.gemm_summary(d, s)
    assert "x4.75-x9.09 over the 1/2 thread(s), each at its best size measured" in summary


def test_workshop_run_lists_what_the_truth_check_found_in_its_index(tmp_path, capsys):
    from workshop.cli.notebooks import _truth_check
    from workshop.launch.notebooks import NotebookRun

    (tmp_path / "notebooks").mkdir()
    nbformat.write(_nb("recipe beats lever by x1.40 (one round)\n"), tmp_path / "notebooks" / "04_x.ipynb")
    (tmp_path / "index.md").write_text("# Workbook run\n")
    _truth_check(
        [NotebookRun("04_x.ipynb", "ok", 1.0, str(tmp_path / "notebooks" / "04_x.ipynb"), {})], tmp_path
    )
    index = (tmp_path / "index.md").read_text()
    assert (
        "## Truth check" in index
        and "04_x.ipynb: code cell 0" in index
        and "a verdict from one round" in index
    )
    assert "truth check: 1 sentence(s) to fix" in capsys.readouterr().out


def test_a_stored_share_this_run_contradicts_is_said_to_be_contradicted():
    stored = _result(0.0, MIN_ROUNDS)
    stored["measured_at"] = "2026-11-25 05:11:02"
    same = interpret.stored_against_live(stored, _result(0.0, 1))
    assert "overlaps the stored one (33-34%, Test CPU, 2026-11-25)" in same
    assert nbcheck.truth_problems(_nb(same)) == []
    low = _result(0.0, 1)
    low["levers"]["recipe"]["runs"][0]["step_tokens_per_s"] = [400.0, 410.0]
    assert "(13-14%) CONTRADICTS the stored one (33-34%, Test CPU" in interpret.stored_against_live(
        stored, low
    )
    other = {**low, "machine": {"cpu_model": "Another CPU"}}
    assert "neither confirms nor contradicts" in interpret.stored_against_live(stored, other)


def _over_peak_summary(clock_ghz: float, bf16_cells: list[float]):
    from workshop.plan import gemm, hardware

    d = {**hardware.detect(probe_onednn=False), "isa_class": "zen5", "avx512_bf16": True, "amx": False}
    d["clock_ghz"], d["clock_source"], d["cores"] = clock_ghz, "the hypervisor's clock", 2
    cells = [gemm.GemmResult(256, "bf16", 1, bf16_cells), gemm.GemmResult(256, "fp32", 1, [0.1, 0.1, 0.1])]
    return d, gemm.summarize(d, cells)


def test_a_share_above_the_peak_is_not_quoted_and_names_the_wrong_factor():
    """Chapter 01 printed "141.6% of this CPU's bf16 peak" as a share: above 100 % the clock or the FLOP per
    cycle is wrong, and the numbers say which (the clock the rate needs)."""
    from workshop.book import sentences

    d, s = _over_peak_summary(2.6, [0.40, 0.40, 0.40])  # 128 FLOP/cycle: needs 3.13 GHz, a boost clock
    said = sentences.gemm_summary(d, s)
    assert "% of this CPU's bf16 peak" not in said and "no share of it is quoted" in said
    assert "the clock is wrong" in said and "3.12 GHz" in said and "at most" in said
    d, s = _over_peak_summary(2.6, [1.6, 1.6, 1.6])  # needs 12.5 GHz: no core runs that, the peak is wrong
    assert "the peak is wrong" in sentences.gemm_summary(d, s)
    # the reason is bf16's own even where fp32 is further above its peak (the summary's note names fp32)
    d, s = _over_peak_summary(2.6, [0.40, 0.40, 0.40])
    s = {**s, "note": "about fp32"}
    said = sentences.gemm_summary(d, s)
    assert "about fp32" not in said and "(avx512_bf16_zen5) this rate needs 3.12 GHz" in said


def test_a_single_share_above_100_percent_is_found_and_its_range_is_not():
    """Issue 49: "141.6% of this CPU's bf16 peak" stood as a share; above 100 % a figure is a wrong clock or
    peak. A range's upper bound and "above 100% of peak" are not shares."""
    found = nbcheck.truth_problems(
        _nb("bf16 0.40 TFLOPS, 141.6% of this CPU's bf16 peak (avx512_bf16_zen5)\n")
    )
    assert [p.split(": ", 2)[1] for p in found] == ["a single share above 100%"]
    fine = _nb(
        "The step reads above the GEMM ceiling (121-137% of it), so no share of it is quoted\n",
        "above 100% of peak (x1.21): the clock is wrong, not the peak\n",
        "The step is between 98% and 173% of the GEMM ceiling: the GEMM ceiling moved\n",
        "86.0% of this CPU's bf16 peak (avx512_bf16_zen5), 10.8% of the AMX peak of the same cores\n",
    )
    assert nbcheck.truth_problems(fine) == []
