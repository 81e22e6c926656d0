"""``WorkflowService.resume``: a stored run continues as it was started — its source, args, limits,
profile, directory, provider choice and fake script — replaying its finished calls; overrides may only
narrow the limits; providers come from the service's pool, built once per configuration and closed on
shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import MemoryStore, WorkflowService
from workflow_mcp.errors import LimitWideningError, RunNotFoundError, WorkflowNotFoundError
from workflow_mcp.events import Event
from workflow_mcp.service import ProviderChoice, RunLimits, RunOverrides

from helpers import CountedProvider, counted_provider

BOUND_S = 60.0

BUDGETED = (
    "export const meta = { name: 'budgeted', description: 'calls until its budget is spent' }\n"
    "let n = 0\n"
    "while (n < 50 && budget.remaining() > 0) { await agent('call ' + n, { label: 'c' + n }); n++ }\n"
    "return { n, args: args === undefined ? 'undefined' : args }\n"
)
TEN_TOKENS = {"default": {"text": "ok", "tokens": {"output": 10}}}


def arun(coro: Coroutine[Any, Any, Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, BOUND_S)

    return asyncio.run(bounded())


def write(tmp_path: Path, source: str = BUDGETED) -> str:
    path = tmp_path / "budgeted.js"
    path.write_text(source)
    return str(path)


def started(events: list[Event]) -> dict[str, Any]:
    return next(e.payload for e in events if e.type == "run.started")


def types(events: list[Event], kind: str) -> list[str]:
    return [str(e.payload.get("label")) for e in events if e.type == kind]


async def first_run(service: WorkflowService, path: str, **limits: int) -> str:
    handle = await service.start(
        path,
        provider=ProviderChoice("fake", TEN_TOKENS),
        args={"who": "first"},
        limits=RunLimits(**{"token_budget": 30, **limits}),
    )
    assert (await handle.result())["n"] == 3
    return handle.run_id


def test_a_resume_replays_every_call_under_the_runs_own_budget_args_and_fake_script(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        run_id = await first_run(service, write(tmp_path), concurrency=2, max_agents=40)
        handle = await service.resume(run_id)
        value = await handle.result()
        events = handle.log.events
        assert value == {"n": 3, "args": {"who": "first"}}
        assert types(events, "agent.cached") == ["c0", "c1", "c2"] and types(events, "agent.started") == []
        payload = started(events)
        assert (payload["tokenBudget"], payload["concurrency"], payload["resumedFrom"]) == (30, 2, run_id)
        record = service.store.get_run(handle.run_id)
        assert record is not None and record.options["max_agents"] == 40
        assert record.options["providerConfig"] == {"name": "fake", "fakeScript": TEN_TOKENS}

    arun(go())


def test_an_override_narrows_a_limit_and_the_budget_guarded_loop_replays_less(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        run_id = await first_run(service, write(tmp_path))
        handle = await service.resume(run_id, RunOverrides(limits=RunLimits(token_budget=20, concurrency=1)))
        assert (await handle.result())["n"] == 2
        assert types(handle.log.events, "agent.cached") == ["c0", "c1"]
        assert started(handle.log.events)["concurrency"] == 1

    arun(go())


@pytest.mark.parametrize(
    ("limit", "value", "named"),
    [
        ("token_budget", 31, "tokenBudget (--token-budget) 30"),
        ("concurrency", 3, "concurrency (--concurrency) 2"),
        ("max_agents", 1000, "maxAgents (--max-agents) 40"),
        ("heap_mb", 2048, "heapMb (--heap-mb) 1,024"),  # left at its default: the default is the bound
        ("sync_timeout_ms", 30_001, "syncTimeoutMs (--sync-timeout-ms) 30,000"),
    ],
)
def test_an_override_that_widens_a_limit_is_refused_naming_the_limit_and_nothing_starts(
    tmp_path: Path, limit: str, value: int, named: str
) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        run_id = await first_run(service, write(tmp_path), concurrency=2, max_agents=40)
        with pytest.raises(LimitWideningError) as refused:
            await service.resume(run_id, RunOverrides(limits=RunLimits(**{limit: value})))
        assert f"run {run_id} ran with {named}" in str(refused.value)
        assert f"workflow-mcp run FILE --resume-from {run_id}" in str(refused.value)
        assert len(service.list_runs()) == 1

    arun(go())


def test_a_limit_the_run_left_unbounded_may_be_set_on_resume(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        run_id = await first_run(service, write(tmp_path))
        handle = await service.resume(run_id, RunOverrides(limits=RunLimits(agent_timeout_ms=5_000)))
        await handle.result()
        record = service.store.get_run(handle.run_id)
        assert record is not None and record.options["agent_timeout_ms"] == 5_000

    arun(go())


def test_a_ceiling_caps_the_stored_limits_without_refusing(tmp_path: Path) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        run_id = await first_run(service, write(tmp_path))
        handle = await service.resume(run_id, ceiling=RunLimits(token_budget=10))
        assert (await handle.result())["n"] == 1

    arun(go())


def test_naming_the_fake_again_keeps_its_script_and_an_empty_script_replaces_it(tmp_path: Path) -> None:
    source = (
        "export const meta = { name: 'two', description: 'two calls' }\n"
        "const a = await agent('first')\n"
        "return [a, await agent('second')]\n"
    )
    script = {"rules": [{"match": {"prompt": "^second$"}, "respond": {"fail": "provider"}}]}

    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        first = await service.start(write(tmp_path, source), provider=ProviderChoice("fake", script))
        assert await first.result() == ["first", None]
        kept = await service.resume(first.run_id, RunOverrides(provider=ProviderChoice("fake")))
        assert await kept.result() == ["first", None]
        replaced = await service.resume(first.run_id, RunOverrides(provider=ProviderChoice("fake", {})))
        assert await replaced.result() == ["first", "second"]

    arun(go())


def test_resuming_an_unknown_run_is_a_run_not_found_error_that_callers_catch_as_not_found(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        with pytest.raises(RunNotFoundError, match=r"no stored run 'run_nope'.*runs list") as caught:
            await service.resume("run_nope")
        assert isinstance(caught.value, WorkflowNotFoundError) and caught.value.run_id == "run_nope"
        for query in (service.status, service.events, service.cancel, service.owner_of, service.run_status):
            with pytest.raises(RunNotFoundError):
                query("run_nope")

    arun(go())


@pytest.fixture
def counted() -> Iterator[list[CountedProvider]]:
    with counted_provider() as built:
        yield built


def test_runs_under_one_configuration_share_one_provider_closed_when_the_service_shuts_down(
    tmp_path: Path, counted: list[CountedProvider]
) -> None:
    source = "export const meta = { name: 'one', description: 'one call' }\nreturn await agent('hi')\n"

    async def go() -> None:
        service = WorkflowService(MemoryStore(), cwd=str(tmp_path))
        path = write(tmp_path, source)
        for _ in range(3):
            handle = await service.start(path, provider=ProviderChoice("counted"))
            assert await handle.result() == "counted hi"
        resumed = await service.resume(handle.run_id, RunOverrides(policy="prefix"))
        await resumed.result()
        assert len(counted) == 1 and not counted[0].closed
        (tmp_path / "workflow-mcp.toml").write_text("[providers.counted]\n")  # another configuration
        handle = await service.start(path, provider=ProviderChoice("counted"))
        await handle.result()
        assert len(counted) == 2
        await service.shutdown()
        assert [p.closed for p in counted] == [True, True]

    arun(go())
