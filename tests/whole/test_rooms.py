"""Every layer of workshop/ stays readable in one screen: no function is longer than 60 lines, counted with
ast (end_lineno - lineno + 1, docstring included; methods and nested functions too), and no file is longer
than 600 lines, so the rule cannot erode one line at a time. No allow-list: a long function is split on its
seams, a long file becomes a package of modules named after what they do. And the commands live in one
place: argument parsing only in workshop/cli/ (the layers below return data and raise WorkshopError), and
only errors.exit_code turns a WorkshopError into the one-line error (cli/base.py's `command` and the
per-rank worker entry points end through it)."""

import ast
from pathlib import Path

import pytest

from workshop.paths import REPO

WORKSHOP = REPO / "workshop"
LIMIT = 60
FILE_LIMIT = 600
LAYERS = sorted(p.name for p in WORKSHOP.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def long_functions(folder: Path, limit: int = LIMIT) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(folder)}:{node.lineno} {node.name}: {lines} lines")
    return found


def long_files(folder: Path, limit: int = FILE_LIMIT) -> list[str]:
    counts = {path: len(path.read_text().splitlines()) for path in sorted(folder.rglob("*.py"))}
    return [f"{path.relative_to(folder)}: {n} lines" for path, n in counts.items() if n > limit]


def test_every_layer_is_checked():
    assert {"book", "cli", "experiments", "k8s", "launch", "plan", "report", "train"} <= set(LAYERS)


@pytest.mark.parametrize("layer", [*LAYERS, "."], ids=[*LAYERS, "top"])
def test_no_function_of_the_layer_is_longer_than_60_lines(layer):
    folder = WORKSHOP / layer
    found = long_functions(folder) if layer != "." else [f for f in long_functions(folder) if "/" not in f]
    assert found == [], f"split these (limit {LIMIT} lines)"


def test_no_file_of_the_package_is_longer_than_600_lines():
    assert long_files(WORKSHOP) == [], f"split these on their seams (limit {FILE_LIMIT} lines)"


def test_the_count_includes_methods_nested_functions_and_docstrings(tmp_path):
    body = "".join(f"            x{i} = {i}\n" for i in range(58))
    (tmp_path / "m.py").write_text(
        f'def outer():\n    class C:\n        def m(self):\n            """doc"""\n{body}'
    )
    assert long_functions(tmp_path) == ["m.py:1 outer: 62 lines"]
    assert long_functions(tmp_path, limit=59) == ["m.py:1 outer: 62 lines", "m.py:3 m: 60 lines"]
    assert long_files(tmp_path, limit=62) == [] and long_files(tmp_path, limit=61) == ["m.py: 62 lines"]


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _catches_workshop_error(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            if "WorkshopError" in ast.unparse(node.type) and any(
                isinstance(n, ast.Call) and ast.unparse(n.func) == "report" for n in ast.walk(node)
            ):
                return True
    return False


def test_argument_parsing_lives_in_cli_only():
    below = [p for p in sorted(WORKSHOP.rglob("*.py")) if "cli" not in p.relative_to(WORKSHOP).parts[:1]]
    offenders = [str(p.relative_to(WORKSHOP)) for p in below if "argparse" in _imported_modules(p)]
    assert offenders == [], "move the parser into workshop/cli/ (the layer below returns data)"


def test_only_exit_code_turns_a_workshop_error_into_the_error_line():
    offenders = [
        str(p.relative_to(WORKSHOP))
        for p in sorted(WORKSHOP.rglob("*.py"))
        if p != WORKSHOP / "errors.py" and _catches_workshop_error(p)
    ]
    assert offenders == [], "decorate the command with workshop.cli.base.command (or use errors.exit_code)"


def test_the_rules_see_what_they_look_for(tmp_path):
    (tmp_path / "a.py").write_text("import argparse\n")
    (tmp_path / "b.py").write_text("from argparse import ArgumentParser\n")
    (tmp_path / "c.py").write_text("try:\n    f()\nexcept WorkshopError as e:\n    return_ = report(e)\n")
    assert "argparse" in _imported_modules(tmp_path / "a.py") and "argparse" in _imported_modules(
        tmp_path / "b.py"
    )
    assert _catches_workshop_error(tmp_path / "c.py") and not _catches_workshop_error(tmp_path / "a.py")
