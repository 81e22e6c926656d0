"""Puts ``tests/`` and this folder on ``sys.path`` (``helpers``, ``library_kit``); the library fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[2])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from workflow_mcp.service import WorkflowService  # noqa: E402

from library_kit import Places  # noqa: E402


@pytest.fixture
def places(tmp_path: Path) -> Places:
    return Places(tmp_path)


@pytest.fixture
def service(places: Places) -> Iterator[WorkflowService]:
    svc = places.service()
    try:
        yield svc
    finally:
        svc.store.close()
