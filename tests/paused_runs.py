"""Usage-limit-paused runs for the tests of automatic resume and of cancelling ended runs: a two-call
workflow whose second call hits the fake provider's scripted usage limit, a hand-moved clock the
provider pool reads for ``resetsAt``, and a bounded event loop to drive them."""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from workflow_mcp import WorkflowService
from workflow_mcp.providers.pool import ProviderPool
from workflow_mcp.service import ProviderChoice
from workflow_mcp.store.base import RunStore

from helpers import arun as _arun

T = TypeVar("T")

BOUND_S = 60.0
RESET = "2026-01-01T05:00:00Z"
RESET_EPOCH = 1767243600.0
TWO_CALLS = (
    "export const meta = { name: 'two-calls', description: 'a then b' }\n"
    "const a = await agent('first', { label: 'a' })\n"
    "const b = await agent('second', { label: 'b' })\n"
    "return [a, b]\n"
)
LIMITED = {
    "rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit", "resetsAt": RESET}}],
    "default": {"echo": True},
}
"""The fake script whose call ``b`` is refused for a usage limit until :data:`RESET`."""
ALWAYS_LIMITED = {  # a relative Retry-After never expires: every attempt pauses again
    "rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit", "retryAfterMs": 60_000}}],
    "default": {"echo": True},
}


class Clock:
    """A clock (epoch seconds) the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def arun(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in a fresh event loop, for at most :data:`BOUND_S` seconds."""
    return _arun(coro, BOUND_S)


def service_over(store: RunStore, tmp_path: Path, clock: Clock) -> WorkflowService:
    """A service over ``store`` in ``tmp_path`` (which gets ``two.js``) whose fake provider reads ``clock``."""
    (tmp_path / "two.js").write_text(TWO_CALLS)
    return WorkflowService(store, cwd=str(tmp_path), providers=ProviderPool(fake_clock=clock))


async def paused_run(service: WorkflowService, tmp_path: Path, script: dict[str, Any] = LIMITED) -> str:
    """The id of a run of ``two.js`` under ``script`` that paused (for its usage limit)."""
    handle = await service.start(str(tmp_path / "two.js"), provider=ProviderChoice("fake", script))
    assert await handle.wait() == "paused"
    return handle.run_id
