"""Test-session glue for nbval (the notebooks under notebooks/ are collected as tests, see pyproject.toml).

Lives at the root because it must see both tests/ and notebooks/: every notebook cell becomes an item marked
`slow`, tests marked `after_notebooks` (they check what the notebooks wrote) run last, and the sanitizer path
from addopts works from any working directory.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_configure(config):
    config.workshop_session_start = time.time()  # files newer than this were written by this session's notebooks
    sanitize = getattr(config.option, "nbval_sanitize_with", None)
    if sanitize and not Path(sanitize).is_absolute() and not Path(sanitize).exists():
        config.option.nbval_sanitize_with = str(ROOT / sanitize)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
    last = [i for i in items if i.get_closest_marker("after_notebooks")]
    items[:] = [i for i in items if not i.get_closest_marker("after_notebooks")] + last
