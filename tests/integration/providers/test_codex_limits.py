"""Codex rate and usage limits through the real ``codex app-server`` and the loopback mock Responses
API: a ChatGPT plan's usage limit (``usage_limit_reached``) and an API key out of quota
(``insufficient_quota``) pause the run with ``usage_limit`` (with ``resetsAt`` when codex names the
reset time); a 429 that outlasts codex's own retries is retried by the engine's backoff."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mocks.mock_responses import Received, Reply
from workflow_mcp.engine.backoff import RetryPolicy

from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)

RESETS_AT = 1796200000  # 2026-12-02T08:26:40Z


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Codex words the reset in its local time, which is ours: both read TZ (passed through)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def run(codex: CodexSetup, body: str, **options: Any) -> Outcome:
    async with codex.router() as router:
        return await finish(start(body, provider=router, cwd=str(codex.cwd), **options))


def test_a_plans_usage_limit_pauses_the_run_with_the_reset_time_codex_names(codex: CodexSetup) -> None:
    codex.mock.on(
        "^q$",
        Reply(
            status=429,
            message="The usage limit has been reached",
            error_type="usage_limit_reached",
            error_fields=(("resets_at", RESETS_AT), ("plan_type", "plus")),
        ),
    )
    out = arun(run(codex, "return await agent('q', { label: 'q' })"))
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "usage_limit" and paused.payload["backend"] == "codex"
    # Codex says "try again at Dec 2nd, 2026 8:26 AM": the minute after it, so never early.
    assert paused.payload["resetsAt"] == "2026-12-02T08:27:00Z"
    assert [e.payload["reason"] for e in out.of("agent.failed")] == ["usage_limit"]


def test_an_api_key_out_of_quota_pauses_the_run_without_a_reset_time(codex: CodexSetup) -> None:
    codex.mock.on("^q$", Reply(status=429, message="You exceeded your quota", code="insufficient_quota"))
    out = arun(run(codex, "return await agent('q', { label: 'q' })"))
    assert out.status == "paused"
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "usage_limit" and paused.payload["resetsAt"] is None


def test_a_429_that_outlasts_codexs_retries_is_backed_off_and_asked_again(codex: CodexSetup) -> None:
    seen: list[int] = []

    def busy_once(rec: Received) -> Reply:
        seen.append(rec.n)
        return Reply(status=429, message="Rate limit reached") if len(seen) == 1 else Reply(text="answered")

    codex.mock.on("^q$", busy_once)
    out = arun(
        run(
            codex,
            "return await agent('q', { label: 'q' })",
            retry=RetryPolicy(retries=2, base_ms=10, max_ms=20),
        )
    )
    assert out.status == "completed" and out.result == "answered", out.error
    assert len(seen) == 2
    (warning,) = [e for e in out.of("warning") if "rate limit" in e.payload["message"]]
    assert "retrying in" in warning.payload["message"] and "(backoff; 1 of 2)" in warning.payload["message"]
