"""Five shared runtime conformance cases give the same result on ``codex`` as on ``fake`` when the
mock model answers what the case's fake script answers.

The mock is scripted per prompt with the fake script's content (a model sees prompts, not labels):
echoes, texts, structured results, an HTTP 500 for the fake's ``fail: provider``, an HTTP 400
"disk full" for ``fail: error`` (Codex reports it as a failed turn: an execution error), a
non-JSON answer for ``fail: no_structured_output``, and, for ``fail: skip``, a turn interrupted
from outside the call (what an operator's skip does). ``parallel-order``'s delays are scaled ×3 so
that Codex's own per-turn overhead cannot reorder them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_responses import MockResponses, Reply
from workflow_mcp import FakeProvider, MemoryStore, RunFailedError, RunOptions, WorkflowService, load_workflow
from workflow_mcp.providers.codex import CodexProvider
from workflow_mcp.providers.routing import RoutingProvider

from codex_kit import CodexSetup
from helpers import RUN_TIMEOUT_S, arun

CASES_DIR = Path(__file__).resolve().parents[2] / "conformance" / "cases" / "runtime"

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S * 2)


def script_basic_agent(mock: MockResponses) -> None:
    mock.default = Reply(echo=True)


def script_schema_structured_output(mock: MockResponses) -> None:
    mock.on("review a.ts", Reply(json={"issues": ["unused import"], "severity": "low"}), whole_thread=True)
    mock.on("review b.ts", Reply(json={"issues": "not-an-array", "severity": None}), whole_thread=True)
    mock.on("review c.ts", Reply(text="I could not produce the review."), whole_thread=True)


def script_parallel_order(mock: MockResponses) -> None:
    mock.on("work slow", Reply(text="S", delay_s=1.8))
    mock.on("work fast", Reply(text="F", delay_s=0.03))
    mock.on("work medium", Reply(text="M", delay_s=0.9))


def script_agent_failure_modes(mock: MockResponses) -> None:
    mock.on("^x$", Reply(status=500, message="HTTP 500"))
    mock.on("^y$", Reply(hold=True))  # interrupted from outside by skip_turns() below
    mock.on("^z$", Reply(status=400, message="disk full"))


def script_label_fallback(mock: MockResponses) -> None:
    mock.on("^Review   the", Reply(text="Review the file src/index.ts and list every defect you"))
    mock.on("^short prompt$", Reply(text="explicit-label"))


SCRIPTS: dict[str, Callable[[MockResponses], None]] = {
    "basic-agent": script_basic_agent,
    "schema-structured-output": script_schema_structured_output,
    "parallel-order": script_parallel_order,
    "agent-failure-modes": script_agent_failure_modes,
    "label-fallback": script_label_fallback,
}


async def skip_turns(mock: MockResponses, codex: CodexProvider, pattern: str) -> None:
    """Interrupt the turn whose prompt matches ``pattern`` once it reaches the model (a user skip)."""
    rec = await asyncio.to_thread(mock.wait_for_prompt, pattern, RUN_TIMEOUT_S)
    assert rec.thread_id and rec.turn_id
    await codex.interrupt_turn(rec.thread_id, rec.turn_id)


async def run_case(name: str, provider: Any, tmp: Path) -> tuple[str, Any]:
    case = json.loads((CASES_DIR / name / "case.json").read_text())
    service = WorkflowService(MemoryStore(), cwd=str(tmp), home=str(tmp / "home"))
    opts = case.get("options", {})
    handle = service.start_run(
        load_workflow(CASES_DIR / name / "workflow.js"),
        provider=provider(case) if callable(provider) else provider,
        options=RunOptions(cwd=str(tmp), home=str(tmp / "home"), concurrency=opts.get("concurrency")),
    )
    try:
        result: Any = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
    except RunFailedError as exc:
        result = exc.message
    return handle.status, result


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_shared_case_gives_the_same_result_on_codex_as_on_fake(
    name: str, codex: CodexSetup, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    case = json.loads((CASES_DIR / name / "case.json").read_text())
    SCRIPTS[name](codex.mock)

    async def scenario() -> tuple[tuple[str, Any], tuple[str, Any]]:
        on_fake = await run_case(name, lambda c: FakeProvider(c.get("fake")), tmp_path)
        async with codex.router() as router:
            assert isinstance(router, RoutingProvider)
            skipper = None
            if name == "agent-failure-modes":
                provider = router.providers["codex"]
                assert isinstance(provider, CodexProvider)
                skipper = asyncio.ensure_future(skip_turns(codex.mock, provider, "^y$"))
            try:
                on_codex = await run_case(name, router, codex.cwd)
            finally:
                codex.mock.release()
            if skipper is not None:
                await asyncio.wait_for(skipper, 10)
        return on_fake, on_codex

    on_fake, on_codex = arun(scenario(), RUN_TIMEOUT_S * 2 - 10)
    assert on_fake == (case["expect"]["status"], case["expect"]["result"])
    assert on_codex == on_fake
