"""Puts this folder on ``sys.path`` (for ``mcp_kit``, shared with tests/e2e/mcp) and provides ``env``."""

from __future__ import annotations

import gc
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from mcp_kit import Env, make_env  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def env(tmp_path: Path, anyio_backend: str) -> AsyncIterator[Env]:
    """A fresh project and service; afterwards every run still live is cancelled, and finished realm
    workers are collected while their event loop is still open (asyncio's subprocess transports
    complain when they are finalized after it closed)."""
    made = make_env(tmp_path)
    yield made
    await made.service.shutdown("the test ended", timeout_s=10)
    gc.collect()
