"""The ``backend`` fixture: each contract test runs once per provider (:mod:`provider_backends`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from provider_backends import PROVIDERS, Backend, backend_for


@pytest.fixture(params=PROVIDERS)
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    cwd = tmp_path / "cwd"  # the kits of claude and acp make their own
    cwd.mkdir()
    with backend_for(str(request.param), tmp_path, cwd, monkeypatch) as found:
        yield found
