"""The training and launch layers stay readable in one screen: no function in workshop/train or
workshop/launch is longer than 60 lines, counted with ast (end_lineno - lineno + 1, docstring included;
methods and nested functions too), so the rule cannot erode one line at a time."""

import ast
from pathlib import Path

import pytest

from workshop.paths import REPO

WORKSHOP = REPO / "workshop"
LIMIT = 60


def long_functions(folder: Path, limit: int = LIMIT) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(folder)}:{node.lineno} {node.name}: {lines} lines")
    return found


@pytest.mark.parametrize("layer", ["train", "launch"])
def test_no_function_of_the_layer_is_longer_than_60_lines(layer):
    assert long_functions(WORKSHOP / layer) == [], f"split these (limit {LIMIT} lines)"


def test_the_count_includes_methods_nested_functions_and_docstrings(tmp_path):
    body = "".join(f"            x{i} = {i}\n" for i in range(58))
    (tmp_path / "m.py").write_text(
        f'def outer():\n    class C:\n        def m(self):\n            """doc"""\n{body}'
    )
    assert long_functions(tmp_path) == ["m.py:1 outer: 62 lines"]
    assert long_functions(tmp_path, limit=59) == ["m.py:1 outer: 62 lines", "m.py:3 m: 60 lines"]
