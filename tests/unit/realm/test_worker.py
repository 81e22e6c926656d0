"""The realm worker process: protocol hello, environment, and its life ending with the run or the host."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import pytest

from workflow_mcp.engine.run import RunHandle
from workflow_mcp.providers import FakeProvider
from workflow_mcp.realm.messages import PROTOCOL_VERSION, check_worker_message
from workflow_mcp.realm.worker import RealmWorker, check_syntax

from helpers import arun, pid_alive, start

BOUND_S = 20


async def first_event(handle: RunHandle, event_type: str) -> None:
    async def scan() -> None:
        async for event in handle.events():
            if event.type == event_type:
                return
        raise AssertionError(f"the run ended without a {event_type} event")

    await asyncio.wait_for(scan(), BOUND_S)


def test_the_worker_process_is_killed_when_the_run_is_cancelled() -> None:
    async def scenario() -> tuple[int, str, bool]:
        handle = start(
            "await agent('slow', { label: 'slow' })\nreturn 1",
            provider=FakeProvider({"default": {"text": "late", "delayMs": 60_000}}),
        )
        await first_event(handle, "agent.started")
        pid = handle.realm_pid
        assert pid is not None and pid_alive(pid)
        handle.cancel("test cancel")
        status = await asyncio.wait_for(handle.wait(), BOUND_S)
        return pid, status, pid_alive(pid)

    pid, status, alive = arun(scenario())
    assert status == "cancelled"
    assert alive is False, f"worker {pid} outlived its cancelled run"


def test_the_worker_process_is_gone_once_a_run_completes_or_fails() -> None:
    async def scenario(body: str) -> tuple[str, bool]:
        handle = start(body)
        status = await asyncio.wait_for(handle.wait(), BOUND_S)
        pid = handle.realm_pid
        assert pid is not None
        return status, pid_alive(pid)

    assert arun(scenario("return 1")) == ("completed", False)
    assert arun(scenario("throw new Error('boom')")) == ("failed", False)


def test_the_worker_exits_by_itself_when_its_stdin_closes() -> None:
    async def scenario() -> int | None:
        worker = await RealmWorker.spawn()
        try:
            worker.end_input()
            return await asyncio.wait_for(worker.wait(), BOUND_S)
        finally:
            await worker.close()

    assert arun(scenario()) == 0


def test_closing_a_worker_that_already_exited_keeps_its_exit_status_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Process.kill() polls (waitpid) first and could reap the exited worker before asyncio's child
    # watcher did: "Unknown child process pid N, will report returncode 255" (seen while fuzzing).
    # The race is timing-dependent; this pins what close() must keep whichever way it goes.
    async def scenario() -> int | None:
        worker = await RealmWorker.spawn()
        worker.end_input()
        pid = worker.pid
        with contextlib.suppress(ChildProcessError):  # exited, unreaped or already reaped
            await asyncio.to_thread(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        await worker.close()
        return worker.returncode

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        assert arun(scenario()) == 0
    assert not [r for r in caplog.records if "Unknown child process" in r.getMessage()]


def test_a_worker_running_a_workflow_that_never_ends_exits_when_its_stdin_closes() -> None:
    async def scenario() -> int | None:
        worker = await RealmWorker.spawn()
        try:
            await worker.send(
                {
                    "t": "start",
                    "body": "await new Promise(() => {})",
                    "filename": "forever.js",
                    "budgetTotal": None,
                    "spent": 0,
                    "syncTimeoutMs": 1000,
                    "maxFanoutItems": 4096,
                    "profile": "claude-code/2.1.332",
                    "cacheKeyOptions": [],
                }
            )
            worker.end_input()
            return await asyncio.wait_for(worker.wait(), BOUND_S)
        finally:
            await worker.close()

    assert arun(scenario()) == 0


def test_a_spawned_worker_speaks_the_host_protocol_and_closing_it_twice_is_safe() -> None:
    async def scenario() -> tuple[int, int | None]:
        worker = await RealmWorker.spawn()
        await worker.close()
        await worker.close()  # safe twice
        return worker.pid, worker.returncode

    pid, returncode = arun(scenario())
    assert returncode is not None
    assert not pid_alive(pid)
    assert PROTOCOL_VERSION == 4
    assert check_worker_message({"t": "hello", "protocol": 2, "node": "20.0.0"})["t"] == "hello"


def test_the_worker_gets_an_empty_environment_and_no_host_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_TEST_SECRET", "do-not-leak")

    async def scenario() -> bytes:
        worker = await RealmWorker.spawn()
        try:
            return Path(f"/proc/{worker.pid}/environ").read_bytes()
        finally:
            await worker.close()

    assert arun(scenario()) == b""


def test_check_syntax_reports_one_problem_or_none_per_source_with_a_line() -> None:
    problems = check_syntax(["return 1", "const = 2", "await x; return 3", "let a = 1\nlet a = 2"])
    assert problems[0] is None
    assert problems[1] is not None and problems[1].line == 1
    assert problems[2] is None
    assert problems[3] is not None and problems[3].line == 2
