"""Fixtures for the real-provider integration tests: the bundled ``codex`` (openai-codex SDK)
against the loopback mock Responses API (``tests/mocks/mock_responses.py``), with an isolated
``CODEX_HOME`` in the test's temporary directory. Nothing here needs a network or a credential.

Skipped, with the reason, when the ``codex`` extra is not installed; CI installs it with
``pip install -e '.[test,codex]'``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[2])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from mocks.mock_responses import MockResponses  # noqa: E402

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from codex_kit import SKIP_REASON, CodexSetup  # noqa: E402


@pytest.fixture
def codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CodexSetup]:
    pytest.importorskip("openai_codex", reason=SKIP_REASON)
    # The mock provider's key name (env_key in codex's config); it reaches codex only because the
    # settings allowlist it. Any value works against the mock.
    monkeypatch.setenv("MOCK_API_KEY", "mock-key")
    cwd = tmp_path / "work"
    cwd.mkdir()
    with MockResponses() as mock:
        home = tmp_path / "codex-home"
        mock.codex_config(home)
        yield CodexSetup(
            mock=mock, home=home, cwd=cwd, settings={"codex_home": str(home), "env": ["MOCK_API_KEY"]}
        )
