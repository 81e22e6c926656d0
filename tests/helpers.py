"""Shared helpers for the realm and engine tests: load an inline workflow, run it through the public
engine API with a bounded wait, and look at what came out.

Imported as ``helpers`` (the ``conftest.py`` of each test folder that uses it puts ``tests/`` on
``sys.path``). Everything here drives real parts: the real Node worker and the real engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from workflow_mcp.definitions.load import Workflow, load_workflow
from workflow_mcp.engine.run import MISSING, RunHandle, RunOptions, run_workflow
from workflow_mcp.errors import RunFailedError
from workflow_mcp.events import Event
from workflow_mcp.providers import (
    AgentContext,
    AgentProvider,
    AgentRequest,
    AgentResult,
    CancelSignal,
    FakeProvider,
    ProviderCapabilities,
    ProviderEvent,
)
from workflow_mcp.providers.base import ProviderAuthError
from workflow_mcp.providers.registry import Availability, register_provider, unregister_provider
from workflow_mcp.realm.scripted import ScriptedRealm, ScriptedWorkflow

__all__ = [
    "MISSING",
    "PAUSES",
    "STOPPED",
    "STOPPED_SCRIPT",
    "CountedProvider",
    "LoggedOutAfterFirst",
    "Outcome",
    "RecordingProvider",
    "arun",
    "count",
    "counted_provider",
    "logs",
    "pid_alive",
    "run_source",
    "start",
    "workflow",
]

T = TypeVar("T")

# Every wait in these tests is bounded; a run that needs longer than this is a failure, not a hang.
RUN_TIMEOUT_S = 60.0


def arun(coro: Coroutine[Any, Any, T], timeout: float = RUN_TIMEOUT_S) -> T:
    """``asyncio.run`` with a bound: the coroutine fails with ``TimeoutError`` after ``timeout`` s."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def workflow(body: str, name: str = "test-workflow") -> Workflow:
    """Load ``body`` (plain JavaScript, no meta) as an inline workflow with a generated meta line."""
    source = f"export const meta = {{ name: {name!r}, description: 'a test workflow' }}\n{body}\n"
    return load_workflow(source=source)


@dataclass
class Outcome:
    """What one finished run left behind."""

    handle: RunHandle
    status: str
    result: Any
    error: str | None
    events: list[Event] = field(default_factory=list)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, event_type: str) -> list[Event]:
        return [e for e in self.events if e.type == event_type]

    @property
    def logs(self) -> list[str]:
        return logs(self.events)

    @property
    def failure(self) -> dict[str, Any]:
        (failed,) = self.of("run.failed")
        error: dict[str, Any] = failed.payload["error"]
        return error


def logs(events: list[Event]) -> list[str]:
    return [str(e.payload.get("message", "")) for e in events if e.type == "log"]


def count(events: list[Event], event_type: str) -> int:
    return sum(1 for e in events if e.type == event_type)


BWRAP_MISSING = "bubblewrap (bwrap) is not installed here; CI installs the Debian package bubblewrap"
"""The skip reason of the tests that start the worker under bubblewrap."""

SANDBOX = "none"
"""The worker sandbox :func:`start` uses when a test names none; the ``realm_sandbox`` fixture of
``tests/unit/realm`` sets it to run a whole module under each sandbox."""


def start(
    source: str | Workflow,
    *,
    provider: Any = None,
    args: Any = MISSING,
    **options: Any,
) -> RunHandle:
    """Start a run (needs a running loop). ``source`` is a body for :func:`workflow` or a loaded
    workflow; ``options`` are :class:`RunOptions` fields (``sandbox`` defaults to :data:`SANDBOX`)."""
    wf = source if isinstance(source, Workflow) else workflow(source)
    options.setdefault("sandbox", SANDBOX)
    return run_workflow(
        wf,
        provider=provider if provider is not None else FakeProvider(),
        args=args,
        options=RunOptions(**options),
    )


async def finish(handle: RunHandle, timeout: float = RUN_TIMEOUT_S) -> Outcome:
    """Wait (bounded) for the run to end and collect its outcome."""
    try:
        result = await asyncio.wait_for(handle.result(), timeout)
        error = None
    except RunFailedError as exc:
        result, error = None, exc.message
    return Outcome(handle, handle.status, result, error, handle.log.events)


async def run_async(source: str | Workflow, **kw: Any) -> Outcome:
    return await finish(start(source, **kw))


SCRIPTED_SOURCE = (
    "export const meta = { name: 'scripted', description: 'runs on the scripted realm' }\nreturn 1\n"
)


class _JumpingSelector(selectors.BaseSelector):
    """A selector for :class:`VirtualTimeLoop`: when nothing is ready and the loop would sleep until its
    next timer, the loop's clock jumps there instead (it waits for real only with no timer at all)."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._inner = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._inner.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return self._inner.select(None)
        self._loop.now += timeout
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._inner.get_map()

    def close(self) -> None:
        self._inner.close()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock (``loop.time()``, what every engine deadline — the stall window,
    ``agentTimeoutMs``, retry backoff — and ``asyncio.sleep`` use) only moves when the loop would
    otherwise wait for a timer: it then jumps to that timer at once. Stall and timeout tests on the
    scripted realm are exact and take no wall-clock time. Not for runs with a Node worker (its I/O
    needs real time)."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self.now


def run_in_virtual_time(coro: Coroutine[Any, Any, T], timeout: float = RUN_TIMEOUT_S) -> T:
    """Run ``coro`` on a fresh :class:`VirtualTimeLoop`, bounded by ``timeout`` virtual seconds."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def start_scripted(
    script: Callable[[ScriptedWorkflow], Coroutine[Any, Any, Any]],
    *,
    provider: Any = None,
    args: Any = MISSING,
    executor: Any = None,
    **options: Any,
) -> RunHandle:
    """Start ``script`` on the in-memory :class:`ScriptedRealm` (needs a running loop; no Node);
    ``options`` are :class:`RunOptions` fields."""
    return run_workflow(
        load_workflow(source=SCRIPTED_SOURCE, check_syntax=False),
        provider=provider if provider is not None else FakeProvider(),
        args=args,
        options=RunOptions(**options),
        worker=ScriptedRealm(script),
        executor=executor,
    )


def run_scripted(
    script: Callable[[ScriptedWorkflow], Coroutine[Any, Any, Any]],
    *,
    provider: Any = None,
    args: Any = MISSING,
    timeout: float = RUN_TIMEOUT_S,
    executor: Any = None,
    virtual_time: bool = False,
    **options: Any,
) -> Outcome:
    """Run ``script`` on the in-memory :class:`ScriptedRealm` (no Node process) to its end in a fresh
    event loop (a :class:`VirtualTimeLoop` with ``virtual_time``); ``options`` are :class:`RunOptions`
    fields, ``executor`` the run's executor."""

    async def go() -> Outcome:
        handle = start_scripted(script, provider=provider, args=args, executor=executor, **options)
        return await finish(handle, timeout)

    if virtual_time:
        return run_in_virtual_time(go(), timeout + 5)
    return arun(go(), timeout + 5)


async def call_provider(
    provider: AgentProvider, request: AgentRequest, signal: CancelSignal | None = None
) -> tuple[AgentResult, list[ProviderEvent]]:
    """One direct ``execute`` with a fresh context: the result and the events it emitted."""
    events: list[ProviderEvent] = []

    async def emit(event: ProviderEvent) -> None:
        events.append(event)

    result = await provider.execute(request, AgentContext(signal=signal or CancelSignal(), emit=emit))
    return result, events


def run_source(source: str | Workflow, *, timeout: float = RUN_TIMEOUT_S, **kw: Any) -> Outcome:
    """Run ``source`` to its end in a fresh event loop (see :func:`start` for the keywords)."""
    return arun(run_async(source, **kw), timeout + 5)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a reaped or zombie process counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class RecordingProvider:
    """A provider built from a plain async function, recording every request it is given."""

    name = "recording"

    def __init__(
        self,
        answer: Callable[[AgentRequest, AgentContext], Awaitable[AgentResult]],
        *,
        streaming: bool = False,
    ) -> None:
        self._answer = answer
        self.capabilities = ProviderCapabilities(streaming=streaming)
        self.calls: list[AgentRequest] = []

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        self.calls.append(request)
        return await self._answer(request, context)

    async def aclose(self) -> None:
        pass  # holds nothing


class CountedProvider:
    """A provider registered as ``counted`` the way a third party's is (a factory with ``probe`` and
    ``create``): it answers ``counted <prompt>`` and keeps every instance built in :attr:`built`, so a
    test can see how many were built and whether each was closed."""

    name = "counted"
    capabilities = ProviderCapabilities()
    built: ClassVar[list[CountedProvider]] = []

    def __init__(self) -> None:
        self.closed = False
        CountedProvider.built.append(self)

    @classmethod
    def probe(cls, settings: Any) -> Availability:
        return Availability(True, version="1")

    @classmethod
    def create(cls, settings: Any, *, policy: Any, source: str) -> CountedProvider:
        return cls()

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        return AgentResult(text="counted " + request.prompt)

    async def aclose(self) -> None:
        self.closed = True


@contextlib.contextmanager
def counted_provider() -> Iterator[list[CountedProvider]]:
    """Register :class:`CountedProvider` as ``counted`` for the block; yields the instances built."""
    CountedProvider.built = []
    register_provider("counted", CountedProvider)
    try:
        yield CountedProvider.built
    finally:
        unregister_provider("counted")


PAUSES = (
    "export const meta = { name: 'login', description: 'needs a login half way' }\n"
    "const a = await agent('first')\n"
    "return [a, ...(await parallel([() => agent('second'), () => agent('third')]))]\n"
)
"""A workflow that pauses (``auth_required``) on :class:`LoggedOutAfterFirst` after its first call."""


class LoggedOutAfterFirst:
    """A provider whose login expires after the call with prompt ``first``: the run pauses."""

    name = "codex"
    capabilities = ProviderCapabilities()

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        if request.prompt == "first":
            return AgentResult(text="one")
        raise ProviderAuthError("codex", "token expired", login_hint="codex login")

    async def aclose(self) -> None:
        pass  # holds nothing


STOPPED = """export const meta = { name: 'stopped', description: 'one broken call and three slow ones' }
return await parallel([
  () => agent('broken', { label: 'broken' }),
  () => agent('slow one', { label: 'slow-1' }),
  () => agent('slow two', { label: 'slow-2' }),
  () => agent('slow three', { label: 'slow-3' }),
])
"""
"""With :data:`STOPPED_SCRIPT` at concurrency 2: ``broken`` fails, ``slow-1`` and ``slow-2`` run until
cancelled, ``slow-3`` is still queued (once 3 ``agent.started`` and 1 ``agent.failed`` were seen)."""

STOPPED_SCRIPT = {
    "rules": [{"match": {"label": "broken"}, "respond": {"fail": "provider", "message": "HTTP 500"}}],
    "default": {"text": "late", "delayMs": 120_000},
}
