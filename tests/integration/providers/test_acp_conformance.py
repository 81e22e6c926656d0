"""Five shared runtime conformance cases give the same result on ``acp`` (codex-acp against the
mock) as on ``fake`` when the mock model answers what the case's fake script answers.

The mock scripts are the codex conformance test's (``test_codex_conformance.SCRIPTS``): the model
sees prompts, not labels, and codex-acp talks to the same Responses API. ``fail: skip`` is a turn
cancelled from outside the call (:meth:`ACPProvider.interrupt_session`, what an operator's skip
does); the codex thread id the mock sees is the ACP session id.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_codex_conformance import CASES_DIR, SCRIPTS, run_case

from mocks.mock_responses import MockResponses
from workflow_mcp import FakeProvider
from workflow_mcp.providers.acp import ACPProvider
from workflow_mcp.providers.routing import RoutingProvider

from acp_kit import AcpSetup, codex_acp_setup
from helpers import RUN_TIMEOUT_S, arun

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AcpSetup]:
    with codex_acp_setup(tmp_path, monkeypatch) as setup:
        yield setup


async def skip_turn(mock: MockResponses, provider: ACPProvider, pattern: str) -> None:
    """Cancel the turn whose prompt matches ``pattern`` once it reaches the model (a user skip)."""
    rec = await asyncio.to_thread(mock.wait_for_prompt, pattern, RUN_TIMEOUT_S)
    assert rec.thread_id
    await provider.interrupt_session(rec.thread_id)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_shared_case_gives_the_same_result_on_acp_as_on_fake(
    name: str, agent: AcpSetup, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    case = json.loads((CASES_DIR / name / "case.json").read_text())
    SCRIPTS[name](agent.mock)

    async def scenario() -> tuple[tuple[str, Any], tuple[str, Any]]:
        on_fake = await run_case(name, lambda c: FakeProvider(c.get("fake")), tmp_path)
        async with agent.router() as router:
            assert isinstance(router, RoutingProvider)
            skipper = None
            if name == "agent-failure-modes":
                provider = router.providers["acp"]
                assert isinstance(provider, ACPProvider)
                skipper = asyncio.ensure_future(skip_turn(agent.mock, provider, "^y$"))
            try:
                on_acp = await run_case(name, router, agent.cwd)
            finally:
                agent.mock.release()
            if skipper is not None:
                await asyncio.wait_for(skipper, 10)
        return on_fake, on_acp

    on_fake, on_acp = arun(scenario(), RUN_TIMEOUT_S * 2 - 10)
    assert on_fake == (case["expect"]["status"], case["expect"]["result"])
    assert on_acp == on_fake
