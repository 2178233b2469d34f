"""Every layer of workshop/ stays readable in one screen: no function is longer than 60 lines, counted with
ast (end_lineno - lineno + 1, docstring included; methods and nested functions too), and no file is longer
than 600 lines, so the rule cannot erode one line at a time. No allow-list: a long function is split on its
seams, a long file becomes a package of modules named after what they do."""

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
