"""Every notebook parameter the README names exists in that chapter's parameters cell (papermill's own
inspection), and the recipes it shows run as far as they can without a cluster."""

from __future__ import annotations

import re

import papermill
import pytest

from workshop.launch.notebooks import notebooks
from workshop.paths import REPO

README = (REPO / "README.md").read_text()


def declared(chapter: str) -> set[str]:
    path = next(p for p in notebooks() if p.name.startswith(chapter))
    return set(papermill.inspect_notebook(str(path)))


def full_size_items() -> dict[str, str]:
    """'02' -> the text of the README's 'Chapter 02:' step in 'Full size on EKS'."""
    section = README.split("## Full size on EKS", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"\n(?=\d+\. )", section)
    return {m.group(1): item for item in items if (m := re.match(r"\d+\. Chapter (\d\d):", item))}


def named(text: str) -> set[str]:
    """`-p name value`, and `name=...` or `name` in backticks when it is followed by a value or called a
    parameter."""
    names = set(re.findall(r"-p (\w+) ", text))
    names |= set(re.findall(r"`(\w+)=", text))
    names |= {
        n for n in re.findall(r"`(\w+)`", text) if "_" in n or n in ("model", "nodes", "dataset", "registry")
    }
    return names


def test_full_size_steps_name_only_declared_parameters():
    items = full_size_items()
    assert set(items) >= {"01", "02", "05"}
    for chapter, text in items.items():
        if chapter == "01":
            continue  # step 1 is a CLI command, not a notebook parameter
        missing = named(text) - declared(chapter)
        # module functions named in the text (workshop.k8s.efa.ensure_self_rule) are not parameters
        missing = {m for m in missing if not re.search(rf"\.{m}\b", text)}
        assert not missing, (
            f"README names {sorted(missing)} for chapter {chapter}; declared: {sorted(declared(chapter))}"
        )


def test_every_run_command_in_the_readme_uses_declared_parameters():
    for cmd in re.findall(r"workshop run[^`\n]*", README):
        only = re.search(r"--only (\d\d)", cmd)
        params = re.findall(r"-p (\w+) ", cmd + " ")
        pool = declared(only.group(1)) if only else set().union(*(declared(f"{i:02d}") for i in range(1, 7)))
        assert set(params) <= pool, (cmd, set(params) - pool)


def test_versions_are_parameters_that_every_cell_uses():
    """No cell of 02 or 05 may pin a Karpenter/Trainer release of its own except to demonstrate both forms."""
    import json

    for chapter, var, pattern in (
        ("02", "karpenter_version", r"karpenter\s*=\s*\"\d"),
        ("05", "trainer_version", r"trainer\s*=\s*\"\d"),
    ):
        assert var in declared(chapter)
        path = next(p for p in notebooks() if p.name.startswith(chapter))
        code = [
            "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"
        ][1:]
        assert not [c for c in code if re.search(pattern, c)], (
            f"a cell of {chapter} pins a release instead of {var}"
        )
        assert any(var in c for c in code)


@pytest.mark.parametrize(
    "chapter,flag", [("02", "apply_to_cluster"), ("05", "submit"), ("05", "install_trainer")]
)
def test_nothing_reaches_a_cluster_by_default(chapter, flag):
    params = papermill.inspect_notebook(str(next(p for p in notebooks() if p.name.startswith(chapter))))
    assert params[flag]["default"] == "False"
