"""The shared resume conformance cases (cases/resume/*/), run through ``WorkflowService``.

As ``shared/tools/conformance.py`` does with the CLI: run ``v1.js`` with ``fake1``, then, for each
policy the case expects, run ``v2.js`` (``v1.js`` when absent) with a fresh ``fake2`` (``fake1`` when
absent) resuming from the first run's id. All runs share one SQLite state database, so every resume
reads the first run's journal back from disk. Checks: status, exact result, ``provider_calls``
(count of ``agent.started``) and ``cached_calls`` (count of ``agent.cached``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import FakeProvider, RunFailedError, RunOptions, SqliteStore, WorkflowService, load_workflow
from workflow_mcp.events import Event

CASES_DIR = Path(__file__).parent / "cases" / "resume"
CASES = sorted(d.name for d in CASES_DIR.iterdir() if (d / "case.json").is_file())
RUN_TIMEOUT_S = 60


def check_step(step: str, expect: dict[str, Any], status: str, result: Any, events: list[Event]) -> None:
    assert status == expect["status"], step
    if expect["status"] == "completed" and "result" in expect:
        assert result == expect["result"], step
    if "provider_calls" in expect:
        assert sum(1 for e in events if e.type == "agent.started") == expect["provider_calls"], step
    if "cached_calls" in expect:
        assert sum(1 for e in events if e.type == "agent.cached") == expect["cached_calls"], step


async def run_case(case_dir: Path, tmp: Path) -> None:
    case = json.loads((case_dir / "case.json").read_text())
    expect = case["expect"]
    v1 = load_workflow(case_dir / "v1.js")
    v2 = load_workflow(case_dir / ("v2.js" if (case_dir / "v2.js").exists() else "v1.js"))
    options = RunOptions(
        cwd=str(tmp), home=str(tmp / "home"), concurrency=case.get("options", {}).get("concurrency")
    )
    store = SqliteStore(tmp / "state.db")
    service = WorkflowService(store, cwd=str(tmp), home=str(tmp / "home"))

    async def outcome(handle: Any) -> tuple[str, Any, list[Event]]:
        try:
            result = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
        except RunFailedError:
            result = None
        # Read back what was committed, as a later process would.
        return handle.status, result, service.events(handle.run_id)

    try:
        first = service.start_run(v1, provider=FakeProvider(case["fake1"]), options=options)
        check_step("first run", expect["first"], *await outcome(first))
        for policy in ("content", "prefix"):
            if policy not in expect:
                continue
            resumed = service.start_run(
                v2,
                provider=FakeProvider(case.get("fake2", case["fake1"])),
                options=options,
                resume_from=first.run_id,
                policy=policy,
            )
            status, result, events = await outcome(resumed)
            check_step(f"resume ({policy})", expect[policy], status, result, events)
            started = events[0]
            assert started.type == "run.started"
            assert started.payload["resumedFrom"] == first.run_id
            assert started.payload["resumePolicy"] == policy
    finally:
        store.close()


def test_every_resume_case_has_a_first_run_and_at_least_one_policy() -> None:
    assert len(CASES) >= 8
    for name in CASES:
        expect = json.loads((CASES_DIR / name / "case.json").read_text())["expect"]
        assert "first" in expect and ({"content", "prefix"} & set(expect)), name


@pytest.mark.timeout(3 * RUN_TIMEOUT_S + 30)
@pytest.mark.parametrize("name", CASES)
def test_a_resume_case_replays_what_the_case_expects_under_each_policy(name: str, tmp_path: Path) -> None:
    asyncio.run(run_case(CASES_DIR / name, tmp_path))
