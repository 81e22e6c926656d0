"""Puts this folder and tests/unit/server on ``sys.path`` (for ``mcp_serve_kit`` and the shared
``mcp_kit``) and provides ``site``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
for _folder in (str(_HERE), str(_HERE.parents[1] / "unit" / "server")):
    if _folder not in sys.path:
        sys.path.insert(0, _folder)

from mcp_serve_kit import Site, make_site  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return make_site(tmp_path)
