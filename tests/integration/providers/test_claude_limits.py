"""Claude rate and usage limits through the real Claude Code CLI and the loopback mock Messages API:
a plan's usage limit (``usage limit reached|<epoch>``) and a spent credit balance pause the run with
``usage_limit`` (with ``resetsAt`` when Claude names the reset); a 429 is retried by the engine's
backoff (Claude's own retries are off in these tests).

Skipped, with the reason, when the ``claude`` extra is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "claude_agent_sdk", reason="the claude extra is not installed (pip install -e '.[test,claude]')"
)

from mocks.mock_messages import Received, Reply
from workflow_mcp.engine.backoff import RetryPolicy

from claude_kit import ClaudeSetup, claude_setup
from helpers import RUN_TIMEOUT_S, Outcome, arun, finish, start

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ClaudeSetup]:
    with claude_setup(tmp_path, monkeypatch) as setup:
        yield setup


async def run(claude: ClaudeSetup, body: str, **options: Any) -> Outcome:
    async with claude.router() as router:
        return await finish(start(body, provider=router, cwd=str(claude.cwd), **options))


def test_a_plans_usage_limit_pauses_the_run_with_the_reset_time_claude_names(claude: ClaudeSetup) -> None:
    claude.mock.on("^q$", Reply(status=429, message="Claude AI usage limit reached|1796200000"))
    out = arun(run(claude, "return await agent('q', { label: 'q' })"))
    assert out.status == "paused", out.error
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "usage_limit" and paused.payload["backend"] == "claude"
    assert paused.payload["resetsAt"] == "2026-12-02T08:26:40Z"


def test_a_spent_credit_balance_pauses_the_run_without_a_reset_time(claude: ClaudeSetup) -> None:
    claude.mock.on(
        "^q$", Reply(status=400, message="Your credit balance is too low to access the Anthropic API.")
    )
    out = arun(run(claude, "return await agent('q', { label: 'q' })"))
    assert out.status == "paused", out.error
    (paused,) = out.of("run.paused")
    assert paused.payload["reason"] == "usage_limit" and paused.payload["resetsAt"] is None


def test_a_429_is_backed_off_and_asked_again(claude: ClaudeSetup) -> None:
    seen: list[int] = []

    def busy_once(rec: Received) -> Reply:
        seen.append(rec.n)
        return (
            Reply(status=429, message="Number of requests has exceeded your rate limit")
            if len(seen) == 1
            else Reply(text="answered")
        )

    claude.mock.on("^q$", busy_once)
    out = arun(
        run(
            claude,
            "return await agent('q', { label: 'q' })",
            retry=RetryPolicy(retries=2, base_ms=10, max_ms=20),
        )
    )
    assert out.status == "completed" and out.result == "answered", out.error
    assert len(seen) == 2
    (warning,) = [e for e in out.of("warning") if "rate limit" in e.payload["message"]]
    assert "(backoff; 1 of 2)" in warning.payload["message"]
