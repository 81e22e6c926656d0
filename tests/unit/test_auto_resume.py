"""Automatic resume of usage-limit-paused runs: the fake provider's scripted usage limit pauses a run
the way a real backend's does, and an :class:`AutoResumer` driven by a hand-moved clock resumes it
after ``resetsAt`` (bounded attempts with backoff, each an event), never a run paused for a login or a
checkpoint, nor a cancelled one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp import MemoryStore, RunOptions, WorkflowService, load_workflow
from workflow_mcp._auto_resume import (
    POLL_S,
    AutoResumer,
    AutoResumeSettings,
    ResumeDeferredError,
    auto_resume_settings,
)
from workflow_mcp.errors import InvalidInputError, RunFailedError, StoreError, WorkflowMcpError
from workflow_mcp.events import Event
from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    CheckpointAsk,
    ProviderCapabilities,
)
from workflow_mcp.providers.pool import ProviderPool
from workflow_mcp.service import ProviderChoice

from helpers import LoggedOutAfterFirst
from paused_runs import (
    ALWAYS_LIMITED,
    LIMITED,
    RESET,
    RESET_EPOCH,
    TWO_CALLS,
    Clock,
    arun,
    paused_run,
    service_over,
)


def service_at(tmp_path: Path, clock: Clock) -> WorkflowService:
    return service_over(MemoryStore(), tmp_path, clock)


def notes(service: WorkflowService, run_id: str) -> list[Event]:
    return [e for e in service.events(run_id) if "autoResume" in e.payload]


async def settle(service: WorkflowService, run_id: str) -> str:
    return await service.live[run_id].wait()


def test_a_scripted_usage_limit_pauses_the_run_with_its_reset_time_in_the_status(tmp_path: Path) -> None:
    async def go() -> None:
        service = service_at(tmp_path, Clock(RESET_EPOCH - 60))
        run_id = await paused_run(service, tmp_path, LIMITED)
        state = service.status(run_id)
        assert (state.status, state.paused_reason, state.resets_at) == ("paused", "usage_limit", RESET)
        (paused,) = [e for e in service.events(run_id) if e.type == "run.paused"]
        assert paused.payload["backend"] == "fake" and paused.payload["resumable"] is True
        with pytest.raises(RunFailedError, match=rf"fake reached its usage limit \(it resets at {RESET}\)"):
            await service.live[run_id].result()

    arun(go())


def test_the_run_is_resumed_only_once_the_clock_has_passed_resets_at_and_replays_its_first_call(
    tmp_path: Path,
) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 60)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        resumer = AutoResumer(service, clock=clock)
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH}
        clock.now = RESET_EPOCH - 0.001
        assert await resumer.tick() == []
        clock.now = RESET_EPOCH
        (resumed,) = await resumer.tick()
        assert await service.live[resumed].result() == ["first", "second"]
        record = service.store.get_run(resumed)
        assert record is not None and record.resumed_from == run_id
        assert [e.payload["label"] for e in service.events(resumed) if e.type == "agent.cached"] == ["a"]
        (note,) = notes(service, run_id)
        assert note.type == "log" and note.payload["autoResume"] == {
            "attempt": 1,
            "attempts": 5,
            "resumedAs": resumed,
        }
        assert note.payload["message"] == (
            f"auto-resume attempt 1 of 5: resumed as run {resumed} (the usage limit reset at {RESET})"
        )
        assert service.status(run_id).status == "paused"  # a note is not a run.* event
        assert await resumer.tick() == [] and resumer.waiting() == {}  # the completed run is left alone

    arun(go())


def test_attempts_are_bounded_and_each_waits_its_backoff_after_the_one_before(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, ALWAYS_LIMITED)
        settings = AutoResumeSettings(attempts=2, backoff_s=100, max_backoff_s=150)
        resumer = AutoResumer(service, settings, clock=clock)
        assert await resumer.tick() == []  # resetsAt is the clock + 60 s
        clock.now += 60
        (second,) = await resumer.tick()
        assert await settle(service, second) == "paused"
        # The new pause resets 60 s from now, but the backoff after attempt 1 is 100 s.
        assert await resumer.tick() == [] and resumer.waiting() == {second: clock.now + 100}
        clock.now += 99.9
        assert await resumer.tick() == []
        clock.now += 0.1
        (third,) = await resumer.tick()
        assert await settle(service, third) == "paused"
        assert await resumer.tick() == [] and resumer.waiting() == {}
        clock.now += 10_000
        assert await resumer.tick() == []
        (gave_up,) = notes(service, third)
        assert gave_up.type == "warning" and gave_up.payload["autoResume"] == {"attempt": 2, "attempts": 2}
        assert "gave up" in gave_up.payload["message"] and f"workflow-mcp resume {third}" in str(
            gave_up.payload
        )
        assert [
            n.payload["autoResume"]["attempt"] for n in notes(service, run_id) + notes(service, second)
        ] == [
            1,
            2,
        ]

    arun(go())


def test_a_backoff_doubles_per_attempt_up_to_its_ceiling() -> None:
    settings = AutoResumeSettings(attempts=9, backoff_s=60, max_backoff_s=200)
    assert [settings.backoff(n) for n in (1, 2, 3, 4)] == [60, 120, 200, 200]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attempts": 0}, "auto_resume.attempts must be from 1 to 1000, got 0"),
        ({"backoff_s": 10, "max_backoff_s": 5}, r"auto_resume.backoff_s must be from 0 to max_backoff_s"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_setting(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        AutoResumeSettings(**fields)


def test_a_pause_without_a_reset_time_is_resumed_one_backoff_after_it_was_seen(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH)
        service = service_at(tmp_path, clock)
        script = {"rules": [{"match": {"label": "b"}, "respond": {"fail": "usage_limit"}}]}
        run_id = await paused_run(service, tmp_path, script)
        resumer = AutoResumer(service, AutoResumeSettings(backoff_s=30), clock=clock)
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH + 30}

    arun(go())


class AsksPermission:
    """Asks a human checkpoint on every call (nobody answers: the run pauses checkpoint_required)."""

    name = "fake"
    capabilities = ProviderCapabilities()

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        assert context.checkpoint is not None
        allowed = await context.checkpoint(CheckpointAsk(tool="execute", title="run it", command="make"))
        return AgentResult(text=str(allowed))

    async def aclose(self) -> None:
        pass  # holds nothing


@pytest.mark.parametrize("provider", [LoggedOutAfterFirst(), AsksPermission()], ids=["auth", "checkpoint"])
def test_a_run_paused_for_a_login_or_a_checkpoint_is_never_resumed(tmp_path: Path, provider: Any) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH)
        service = service_at(tmp_path, clock)
        handle = service.start_run(
            load_workflow(source=TWO_CALLS), provider=provider, options=RunOptions(cwd=str(tmp_path))
        )
        assert await handle.wait() == "paused"
        assert service.status(handle.run_id).paused_reason in ("auth_required", "checkpoint_required")
        resumer = AutoResumer(service, clock=clock)
        for _ in range(3):
            clock.now += 86_400
            assert await resumer.tick() == []
        assert resumer.waiting() == {} and notes(service, handle.run_id) == []

    arun(go())


def test_a_cancelled_run_is_never_resumed_and_neither_is_its_chain(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, ALWAYS_LIMITED)
        resumer = AutoResumer(service, clock=clock)
        clock.now += 60
        (resumed,) = await resumer.tick()
        service.cancel(resumed, "stop it")  # cancelled before its call reached the fake
        assert await settle(service, resumed) == "cancelled"
        clock.now += 86_400
        assert await resumer.tick() == [] and resumer.waiting() == {}
        slow = await service.start(
            str(tmp_path / "two.js"), provider=ProviderChoice("fake", {"default": {"delayMs": 60_000}})
        )
        service.cancel(slow.run_id)
        assert await slow.wait() == "cancelled"
        assert await resumer.tick() == [] and notes(service, slow.run_id) == []
        assert len(notes(service, run_id)) == 1

    arun(go())


def test_a_resume_that_cannot_start_is_a_warning_and_is_tried_again_after_its_backoff(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        failures = [WorkflowMcpError("the store is read-only")]

        async def resume(rid: str) -> str:
            if failures:
                raise failures.pop()
            return (await service.resume(rid)).run_id

        resumer = AutoResumer(service, AutoResumeSettings(backoff_s=10), resume=resume, clock=clock)
        clock.now = RESET_EPOCH
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH + 10}
        (warning,) = notes(service, run_id)
        assert warning.type == "warning" and warning.payload["message"] == (
            "auto-resume attempt 1 of 5 could not start: the store is read-only; the next attempt is due at "
            "2026-01-01T05:00:10Z"
        )
        clock.now += 10
        (resumed,) = await resumer.tick()
        assert await service.live[resumed].result() == ["first", "second"]
        assert notes(service, run_id)[-1].payload["autoResume"]["attempt"] == 2

    arun(go())


def test_a_deferred_resume_spends_no_attempt_and_is_noted_once(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        clock.now = RESET_EPOCH
        deferrals = 2

        async def resume(rid: str) -> str:
            nonlocal deferrals
            if deferrals:
                deferrals -= 1
                raise ResumeDeferredError("the server runs 16 runs, its max_runs")
            return (await service.resume(rid)).run_id

        resumer = AutoResumer(
            service, AutoResumeSettings(attempts=1, backoff_s=10), resume=resume, clock=clock
        )
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH + 10}
        clock.now += 10
        assert await resumer.tick() == []
        clock.now += 10
        (resumed,) = await resumer.tick()
        assert await service.live[resumed].result() == ["first", "second"]
        deferred, done = notes(service, run_id)
        assert deferred.payload["message"] == (
            "auto-resume deferred: the server runs 16 runs, its max_runs; it is tried again every 10 s"
        )
        assert done.payload["autoResume"] == {"attempt": 1, "attempts": 1, "resumedAs": resumed}

    arun(go())


def test_a_run_resumed_by_hand_meanwhile_is_left_to_that_resume(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        resumer = AutoResumer(service, clock=clock)
        assert await resumer.tick() == []
        clock.now = RESET_EPOCH
        by_hand = await service.resume(run_id)
        assert await by_hand.result() == ["first", "second"]
        assert await resumer.tick() == [] and notes(service, run_id) == []

    arun(go())


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("enable = true", r"auto_resume.enable: unknown key; expected one of enabled, attempts"),
        ('enabled = "yes"', r"auto_resume.enabled: must be true or false"),
        ("attempts = 2.5", r"auto_resume.attempts: must be an integer from 1 to 1000"),
        ("attempts = 0", r"auto_resume.attempts: must be an integer from 1 to 1000, got 0"),
        ("backoff_s = -1", r"auto_resume.backoff_s: must be a number of seconds from 0"),
        ("backoff_s = 10\nmax_backoff_s = 5", r"auto_resume.backoff_s: must not exceed max_backoff_s \(5\)"),
    ],
)
def test_a_bad_auto_resume_table_is_refused_naming_the_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, message: str
) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(tmp_path / "home"))
    (tmp_path / "workflow-mcp.toml").write_text(f"[auto_resume]\n{table}\n")
    with pytest.raises(InvalidInputError, match=f"{tmp_path / 'workflow-mcp.toml'}: {message}"):
        auto_resume_settings(str(tmp_path))


def test_an_auto_resume_table_gives_its_settings_and_none_means_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(tmp_path / "home"))
    assert auto_resume_settings(str(tmp_path)) == (False, AutoResumeSettings())
    (tmp_path / "workflow-mcp.toml").write_text(
        "[auto_resume]\nenabled = true\nattempts = 3\nbackoff_s = 5\n"
    )
    assert auto_resume_settings(str(tmp_path)) == (True, AutoResumeSettings(attempts=3, backoff_s=5))
    (tmp_path / "workflow-mcp.toml").write_text("[auto_resume]\nbackoff_s = 7200\n")
    assert auto_resume_settings(str(tmp_path)) == (
        False,
        AutoResumeSettings(backoff_s=7200, max_backoff_s=7200),
    )


def test_a_run_another_process_resumed_meanwhile_is_not_resumed_again(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        resumer = AutoResumer(service, clock=clock)
        assert await resumer.tick() == [] and run_id in resumer.waiting()
        clock.now = RESET_EPOCH
        # Another process over the same store (`workflow-mcp resume RUN_ID --wait`) gets there first.
        other = WorkflowService(service.store, cwd=str(tmp_path), providers=ProviderPool(fake_clock=clock))
        by_other = await other.resume(run_id)
        assert await by_other.result() == ["first", "second"]
        await other.shutdown()
        assert await resumer.tick() == [] and notes(service, run_id) == []
        assert [r.resumed_from for r in service.store.list_runs()].count(run_id) == 1

    arun(go())


def test_the_loop_sleeps_until_the_reset_in_poll_sized_steps_and_then_resumes(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 12)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        resumer = AutoResumer(service, clock=clock)
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            clock.now += seconds
            if notes(service, run_id):
                raise asyncio.CancelledError  # resumed: stop the loop

        with pytest.raises(asyncio.CancelledError):
            await resumer.run(sleep)
        assert waits[:3] == [POLL_S, POLL_S, 2.0]  # 12 s to the reset, in steps of at most POLL_S
        (note,) = notes(service, run_id)
        assert await service.live[note.payload["autoResume"]["resumedAs"]].result() == ["first", "second"]

    arun(go())


def test_a_deferral_with_no_backoff_waits_a_poll_interval_instead_of_spinning(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        service = service_at(tmp_path, clock)
        run_id = await paused_run(service, tmp_path, LIMITED)
        clock.now = RESET_EPOCH

        async def busy(rid: str) -> str:
            raise ResumeDeferredError("this server is at its limit of concurrent runs")

        resumer = AutoResumer(service, AutoResumeSettings(backoff_s=0), resume=busy, clock=clock)
        assert await resumer.tick() == [] and resumer.waiting() == {run_id: RESET_EPOCH + POLL_S}

    arun(go())


class FlakyStore(MemoryStore):
    """A memory store whose next ``get_run`` refuses once when armed (a busy or failing store)."""

    armed = False

    def get_run(self, run_id: str) -> Any:
        if self.armed:
            self.armed = False
            raise StoreError("the store is busy")
        return super().get_run(run_id)


def test_a_failing_pass_is_reported_and_the_loop_goes_on(tmp_path: Path) -> None:
    async def go() -> None:
        clock = Clock(RESET_EPOCH - 1)
        heard: list[str] = []
        store = FlakyStore()
        service = WorkflowService(
            store, cwd=str(tmp_path), providers=ProviderPool(fake_clock=clock), notify=heard.append
        )
        (tmp_path / "two.js").write_text(TWO_CALLS)
        run_id = await paused_run(service, tmp_path, LIMITED)
        clock.now = RESET_EPOCH
        store.armed = True  # the first pass's look for a run that already resumes it fails
        resumer = AutoResumer(service, clock=clock)

        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            if len(waits) == 3:
                raise asyncio.CancelledError

        with pytest.raises(asyncio.CancelledError):
            await resumer.run(sleep)
        assert heard == ["auto-resume: a pass failed (StoreError: the store is busy); trying again"]
        assert waits[0] == POLL_S  # after a failed pass, never at once (a lasting fault must not spin)
        assert [n.payload["autoResume"]["attempt"] for n in notes(service, run_id)] == [1]

    arun(go())
