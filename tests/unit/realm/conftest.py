"""Puts ``tests/`` on ``sys.path`` so the tests here can ``import helpers``; the ``realm_sandbox``
fixture runs a module's tests under each worker sandbox."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[2])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import helpers  # noqa: E402


@pytest.fixture(params=["none", "bwrap"])
def realm_sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once with the bare worker and once with the worker inside bubblewrap (a module
    opts in with ``pytestmark = pytest.mark.usefixtures("realm_sandbox")``)."""
    sandbox: str = request.param
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip(helpers.BWRAP_MISSING)
    monkeypatch.setattr(helpers, "SANDBOX", sandbox)
    return sandbox
