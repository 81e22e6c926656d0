"""An in-memory twin of the realm: a :class:`~workflow_mcp.realm.channel.RealmChannel` whose workflow is
a Python script, for testing engine behaviour (admission, the call cap, budgets, providers, events)
without Node.

    async def workflow(realm: ScriptedWorkflow) -> object:
        realm.phase("Scan")
        first = await realm.agent("look", label="scan")
        rest = await realm.parallel(lambda: realm.agent("a"), lambda: realm.agent("b"))
        return [first, *rest]

    run = run_workflow(load_workflow(source=SOURCE), provider=FakeProvider(), worker=ScriptedRealm(workflow))

The run's own source is not executed (only its metadata is read, as for any run); ``workflow`` runs
instead. It speaks the realm protocol to the engine exactly as the Node worker does — ``call``,
``phase``, ``log``, ``done`` and answers to the quiescence probe — and it is deterministic: the script
runs as plain coroutines driven by the twin, so every continuation runs to its next ``await`` as soon as
its answer arrives, before the next answer of the same message is handled. It has no nested
workflows, timers or V8 checks; cache keys chain in call order (``s1:`` keys, not Claude's ``v2:``).

An agent() the engine rejects raises :class:`AgentRejected` in the script (``name``, ``message``,
``code`` as the realm's error would carry); anything the script raises ends the run as the workflow's
failure, as a throw in JavaScript does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .messages import (
    AgentCallMessage,
    Collated,
    Done,
    DoneError,
    Log,
    Phase,
    WorkerMessage,
)

__all__ = ["AgentRejected", "ScriptedRealm", "ScriptedWorkflow"]

Script = Callable[["ScriptedWorkflow"], Coroutine[Any, Any, Any]]


class AgentRejected(Exception):
    """An agent() call the engine rejected (the realm's error: ``name``, ``message``, ``code``)."""

    def __init__(self, name: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.message = message
        self.code = code


@dataclass
class _AgentRequest:
    prompt: str
    opts: dict[str, Any]


@dataclass
class _ParallelRequest:
    thunks: tuple[Callable[[], Awaitable[Any]], ...]


class _Ask:
    """What a script awaits: the twin answers it (``yield`` hands the request to the driver)."""

    def __init__(self, request: _AgentRequest | _ParallelRequest) -> None:
        self.request = request

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.request)


@dataclass(eq=False)
class _Task:
    coro: Coroutine[Any, Any, Any]
    parent: _Join | None = None
    index: int = 0


@dataclass(eq=False)
class _Join:
    """A parallel() waiting for its thunks: their results by index, and how many are left."""

    task: _Task
    results: list[Any]
    left: int
    failed: BaseException | None = None
    done: bool = False


@dataclass
class ScriptedWorkflow:
    """What the script sees of the realm: ``agent``, ``parallel``, ``phase``, ``log``, the run's
    ``args`` (``None`` when none were given) and ``spent`` (budget.spent() after the last answer)."""

    _realm: ScriptedRealm
    args: Any = None
    spent: int = 0

    def agent(self, prompt: str, **opts: Any) -> Awaitable[Any]:
        """agent(prompt, opts): resolves to the call's result; raises :class:`AgentRejected`."""
        return _Ask(_AgentRequest(prompt, opts))

    def parallel(self, *thunks: Callable[[], Awaitable[Any]]) -> Awaitable[list[Any]]:
        """parallel(thunks): every thunk starts at once; resolves to their results in order (the
        first failure is raised once every thunk has ended)."""
        return _Ask(_ParallelRequest(thunks))

    def phase(self, title: str) -> None:
        """phase(title): later calls without a ``phase`` option belong to it."""
        self._realm.current_phase = title
        self._realm._send(Phase(title))

    def log(self, message: str) -> None:
        self._realm._send(Log(message, None))


class ScriptedRealm:
    """The in-memory realm (see the module docstring). One per run; ``posted`` keeps every host
    message it received, decoded, in order (what a test may inspect)."""

    heap_mb = 0
    memory_mb = 0
    memory_limited = False

    def __init__(self, script: Script) -> None:
        self._script = script
        self._queue: asyncio.Queue[WorkerMessage | None] = asyncio.Queue()
        self._waiting: dict[int, _Task] = {}
        self._seq = 0
        self._chain = ""
        self._ended = False
        self._returncode: int | None = None
        self.current_phase: str | None = None
        self.workflow = ScriptedWorkflow(self)
        self.posted: list[dict[str, Any]] = []

    # -- RealmChannel ------------------------------------------------------------------------------
    def post_text(self, text: str) -> None:
        if self._ended:
            return
        msg = json.loads(text)
        self.posted.append(msg)
        t = msg.get("t")
        if t == "start":
            if "args" in msg:
                self.workflow.args = json.loads(msg["args"])
            self._run(_Task(self._script(self.workflow)), None)
        elif t in ("result", "child"):
            self._answer(msg)
        elif t == "batch":
            for item in msg["items"]:
                self._answer(item)
        elif t == "collate":
            # Every continuation has run by now (the script is driven synchronously): the probe
            # comes back after them, as the Node realm's does.
            self._send(Collated(int(msg["id"]), sorted(msg["names"])))
        elif t == "check":
            raise NotImplementedError("the scripted realm checks no syntax; use the Node worker")

    async def receive(self) -> WorkerMessage | None:
        return await self._queue.get()

    async def close(self) -> None:
        if not self._ended:
            self._end(None)

    def stderr_tail(self, limit: int = 2000) -> str:
        return ""

    @property
    def returncode(self) -> int | None:
        return self._returncode

    # -- the script's driver -----------------------------------------------------------------------
    def _send(self, msg: WorkerMessage) -> None:
        if not self._ended:
            self._queue.put_nowait(msg)

    def _end(self, done: Done | None) -> None:
        if done is not None:
            self._queue.put_nowait(done)
        self._ended = True
        self._returncode = 0
        for task in self._waiting.values():
            task.coro.close()
        self._waiting.clear()
        self._queue.put_nowait(None)

    def _answer(self, msg: dict[str, Any]) -> None:
        task = self._waiting.pop(int(msg["id"]), None)
        if task is None:
            return
        reply = msg.get("r") or {}
        if isinstance(reply.get("spent"), int):
            self.workflow.spent = reply["spent"]
        if reply.get("ok"):
            self._run(task, reply.get("value"))
        else:
            error = reply.get("error") or {}
            self._run(
                task,
                None,
                AgentRejected(
                    str(error.get("name", "Error")), str(error.get("message", "")), error.get("code")
                ),
            )

    def _run(self, task: _Task, value: Any, error: BaseException | None = None) -> None:
        """Drive ``task`` until it waits on an answer or ends."""
        while not self._ended:
            try:
                request = task.coro.throw(error) if error is not None else task.coro.send(value)
            except StopIteration as stop:
                self._finished(task, stop.value, None)
                return
            except Exception as exc:  # the script threw: the workflow fails, as a JS throw does
                self._finished(task, None, exc)
                return
            if isinstance(request, _AgentRequest):
                self._call(task, request)
                return
            if isinstance(request, _ParallelRequest):
                if not request.thunks:
                    value, error = [], None
                    continue
                join = _Join(task, [None] * len(request.thunks), len(request.thunks))
                for index, thunk in enumerate(request.thunks):
                    self._run(_Task(_awaited(thunk), join, index), None)
                return
            raise TypeError(f"a scripted workflow awaited {request!r}; await realm.agent or realm.parallel")

    def _call(self, task: _Task, request: _AgentRequest) -> None:
        self._seq += 1
        opts = request.opts
        label = str(opts.get("label") or request.prompt[:60])
        canon = json.dumps(
            {k: opts[k] for k in sorted(opts) if k in ("model", "schema", "agentType")}, separators=(",", ":")
        )
        self._chain = "s1:" + hashlib.sha256(f"{self._chain}\0{request.prompt}\0{canon}".encode()).hexdigest()
        phase = opts.get("phase")
        agent_type = opts.get("agentType")
        self._waiting[self._seq] = task
        self._send(
            AgentCallMessage(
                self._seq,
                request.prompt,
                opts,
                label,
                phase if isinstance(phase, str) else self.current_phase,
                None,
                self._chain,
                canon,
                str(agent_type) if agent_type is not None else None,
            )
        )

    def _finished(self, task: _Task, value: Any, error: BaseException | None) -> None:
        join = task.parent
        if join is None:  # the workflow itself
            if error is None:
                try:
                    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError) as exc:
                    error = exc
                else:
                    self._end(Done(True, text))
                    return
            name = error.name if isinstance(error, AgentRejected) else type(error).__name__
            self._end(Done(False, error=DoneError(name, str(error))))
            return
        if join.done:
            return
        join.results[task.index] = value
        if error is not None and join.failed is None:
            join.failed = error
        join.left -= 1
        if join.left == 0:
            join.done = True
            if join.failed is not None:
                self._run(join.task, None, join.failed)
            else:
                self._run(join.task, join.results)


async def _awaited(thunk: Callable[[], Awaitable[Any]]) -> Any:
    return await thunk()


if TYPE_CHECKING:  # the type checker holds ScriptedRealm to the channel protocol
    from .channel import RealmChannel

    _CHANNEL: type[RealmChannel] = ScriptedRealm
