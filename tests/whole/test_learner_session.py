"""The learner's session without a browser: say()'s HTML, the widgets' sizes and words, `workshop lab`'s copy
(tests/whole/test_browser.py checks the same in JupyterLab)."""

from __future__ import annotations

import json

import pytest

from workshop.book import exercises, lab, show, widgets
from workshop.errors import WorkshopError
from workshop.paths import NOTEBOOKS_DIR


def test_say_wraps_prose_between_words_and_keeps_tables_whole():
    text = "a sentence long enough to wrap\n   indented: still prose\n col a   col b\n------\n x        1"
    assert [kind for kind, _ in show.blocks(text)] == ["prose", "pre"]
    html = show.to_html(text)
    assert "white-space: normal; word-break: keep-all" in html and "padding-left: 3ch" in html
    assert (
        "white-space: pre; word-break: normal" in html and "col a   col b\n------\n x        1</pre>" in html
    )
    bundle = show.Text("<b> & x")._repr_mimebundle_()
    assert bundle["text/plain"] == "<b> & x" and "&lt;b&gt; &amp; x" in bundle["text/html"]


def test_widget_controls_are_sized_for_their_text():
    pytest.importorskip("ipywidgets")
    box, _text = widgets._live(
        {"group": widgets._dropdown("families", [(g, g) for g in widgets.COST_GROUPS], "CPU and GPU")},
        lambda group: group,
    )
    dropdown = box.children[0].children[0]
    label_em, width_em = float(dropdown.style.description_width[:-2]), float(dropdown.layout.width[:-2])
    assert label_em >= widgets.text_em("families")
    assert width_em - label_em >= widgets.text_em("GPU only (p4d/p4de/p5/g6e/g5)") + 2  # the arrow too
    assert widgets.text_em("마감") > widgets.text_em("ab")  # Hangul is counted wide


def test_a_deadline_nothing_meets_is_answered_in_the_boxs_words():
    said = widgets.cost_text("llama-3-8b", 1e8, 0.001, "CPU only (c7i/m7i/r7i)", "moto")
    assert "deadline (hours)" in said and "--max-hours" not in said and "hours" in said


def test_exercises_say_the_parameters_cell_and_the_command():
    text = exercises.show("01")
    assert "parameters cell" in text and "python -m workshop run --only 01 -p nodes 1" in text


def test_workshop_lab_copies_once_beside_notebooks_and_keeps_edits(tmp_path):
    dest, copied = lab.working_copy("en", tmp_path / "lab")
    assert sorted(copied) == sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    first = dest / copied[0]
    first.write_text(json.dumps({"edited": True}))
    assert lab.working_copy("en", dest)[1] == []  # the learner's edit stays
    assert json.loads(first.read_text()) == {"edited": True}
    assert lab.working_copy("en", dest, reset=(copied[0][:2],))[1] == [copied[0]]
    with pytest.raises(WorkshopError, match="no chapter 99; allowed: 01"):
        lab.working_copy("en", dest, reset=("99",))
    with pytest.raises(WorkshopError, match="unknown language 'fr'"):
        lab.working_copy("fr", dest)


def test_workshop_lab_allows_root_only_as_root(monkeypatch, tmp_path):
    monkeypatch.setattr(lab.os, "geteuid", lambda: 0)
    assert "--allow-root" in lab.command(tmp_path, [])
    monkeypatch.setattr(lab.os, "geteuid", lambda: 1000)
    cmd = lab.command(tmp_path, ["--port", "8899"])
    assert "--allow-root" not in cmd and cmd[-2:] == ["--port", "8899"]
    assert f"--ServerApp.root_dir={tmp_path}" in cmd
