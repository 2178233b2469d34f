"""workshop.cli.args.summary: a command's --help description is its docstring's whole first paragraph."""

import pytest

from workshop.cli import main
from workshop.cli.args import summary


def test_summary_joins_the_first_paragraph():
    doc = """`workshop x`: parse, judge every input before any
    connection, call.

    The rest is for readers of the code."""
    assert summary(doc) == "`workshop x`: parse, judge every input before any connection, call."
    assert summary(None) == ""


def test_cluster_help_ends_its_sentence(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_:
        main(["cluster", "--help"])
    assert exit_.value.code == 0
    assert "judge every input before any connection, call the cluster layer (or the teardown), print." in (
        capsys.readouterr().out
    )
