"""Shared fixtures. Heavy runs are marked `slow`; CI runs them too (see .ci/run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def kit_cache(tmp_path_factory) -> Path:
    """One corpus + tokenizer cache for the whole test session (building it takes a few seconds)."""
    path = Path(os.environ.get("WORKSHOP_TEST_CACHE", tmp_path_factory.mktemp("kit")))
    from workshop.data import local_kit

    local_kit(path)
    return path
