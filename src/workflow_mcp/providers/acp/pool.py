"""The ``acp`` provider's agent processes: one :class:`AgentProcess` per running agent program (its
ACP connection, its process group, its stderr tail), the :class:`AgentClient` that answers the
agent's requests (session updates, permission requests under the policy), the :class:`Turn` in
flight per session, and the :class:`ProcessPool` that shares processes between calls."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import json
import os
import re
import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..._nesting import MAX_VALUE_DEPTH, NestingError, top_level
from .._kit import dist_version, upstream_message
from ..base import Checkpoint, CheckpointAsk, ProviderEvent
from ..policy import PermissionAsk, PermissionDecision, Policy, answer_checkpoint, decide_permission
from ..registry import ProviderStartError

__all__ = ["AgentClient", "AgentProcess", "ProcessPool", "Turn", "error_detail", "kill_group"]

_REMEMBERED_SESSIONS: Final = 256
_STDERR_TAIL: Final = 4096
_STDOUT_LIMIT: Final = 16 * 1024 * 1024
_CLOSE_TIMEOUT_S: Final = 3.0


class Turn:
    """One prompt turn in flight: the session updates it received, in order, as events to
    forward, and the agent's messages split at tool calls, thoughts and plans."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.events: asyncio.Queue[ProviderEvent] = asyncio.Queue()
        self.messages: list[list[str]] = []
        self.cancelling = False
        self.checkpoint: Checkpoint | None = None
        self._in_message = False
        self._message_id: str | None = None

    def on_update(self, update: Any) -> None:
        """Record one ``session/update`` (called synchronously, in arrival order)."""
        kind = str(getattr(update, "session_update", ""))
        if kind == "agent_message_chunk":
            content = getattr(update, "content", None)
            text = getattr(content, "text", None)
            if not isinstance(text, str):
                return
            message_id = getattr(update, "message_id", None)
            if not self._in_message or (message_id is not None and message_id != self._message_id):
                self.messages.append([])
            self._in_message = True
            self._message_id = message_id
            self.messages[-1].append(text)
            self.events.put_nowait(ProviderEvent(kind="output.delta", text=text))
            return
        if kind in ("tool_call", "tool_call_update"):
            self._in_message = False
            title = getattr(update, "title", None) or ""
            tool = getattr(update, "kind", None)
            status = getattr(update, "status", None)
            words = " ".join(str(w) for w in (title, f"({tool})" if tool else "", status or "") if w)
            self.events.put_nowait(
                ProviderEvent(
                    kind="progress",
                    text=f"tool {words}".strip(),
                    data={
                        "update": kind,
                        "toolCallId": getattr(update, "tool_call_id", None),
                        "kind": tool,
                        "status": status,
                    },
                )
            )
        elif kind in ("agent_thought_chunk", "plan"):
            self._in_message = False
            self.events.put_nowait(
                ProviderEvent(
                    kind="progress", text="thinking" if kind != "plan" else "plan", data={"update": kind}
                )
            )

    def final_message(self) -> str:
        return "".join(self.messages[-1]) if self.messages else ""


class AgentClient:
    """The client side of one agent connection: routes ``session/update`` to the turn running in
    that session and answers ``session/request_permission`` from the policy. File system and
    terminal methods are not offered (``clientCapabilities`` says so), so the SDK answers them
    "method not found"."""

    def __init__(self, proc: AgentProcess) -> None:
        self._proc = proc

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self._proc.turns.get(session_id)
        if turn is not None:
            turn.on_update(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        schema = importlib.import_module("acp.schema")
        turn = self._proc.turns.get(session_id)
        ask = PermissionAsk(
            kind=getattr(tool_call, "kind", None),
            title=str(getattr(tool_call, "title", None) or ""),
            paths=tuple(str(loc.path) for loc in (getattr(tool_call, "locations", None) or ())),
            options=tuple((str(o.option_id), str(o.kind)) for o in options),
            command=_command_of(getattr(tool_call, "raw_input", None)),
        )
        if turn is None or turn.cancelling:
            decision = PermissionDecision(
                False, None, "the turn is being cancelled" if turn else "no turn runs here"
            )
        else:
            policy = self._proc.policy
            if session_id in self._proc.read_only_sessions:
                policy = policy.narrow({"sandbox": "read-only"})  # an agent without edit tools
            decision = decide_permission(policy, ask, cwd=self._proc.cwd_of(session_id))
            if decision.ask:
                decision = await _ask_checkpoint(turn, ask, decision)
        if turn is not None:
            verdict = "allowed" if decision.allow else "denied"
            turn.events.put_nowait(
                ProviderEvent(
                    kind="progress",
                    text=f"permission {verdict}: {ask.kind or 'other'} {ask.title}".rstrip()
                    + f" ({decision.reason})",
                    data={"permission": ask.kind, "allowed": decision.allow, "paths": list(ask.paths)},
                )
            )
        if decision.option_id is None:
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=decision.option_id)
        )


async def _ask_checkpoint(turn: Turn, ask: PermissionAsk, refusal: PermissionDecision) -> PermissionDecision:
    """Put a request the policy left to a human (``approvals = "ask"``) to the run's checkpoint; with
    no checkpoint, or none answered (the run is pausing), it stays refused."""
    if turn.checkpoint is None:
        return PermissionDecision(False, refusal.option_id, f"{refusal.reason}, but nobody can be asked here")
    answer = await turn.checkpoint(
        CheckpointAsk(tool=ask.kind or "other", title=ask.title, command=ask.command, paths=ask.paths)
    )
    if answer is None:
        return PermissionDecision(False, None, "the run is pausing for a human checkpoint")
    return answer_checkpoint(ask, answer, "a human checkpoint")


def _command_of(raw: Any) -> str | None:
    """The command line in a tool call's ``rawInput`` (``{"command": "ls -l"}`` or a list of words)."""
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        return " ".join(command)
    return None


class AgentProcess:
    """One running agent program and its ACP connection, in a process group of its own."""

    def __init__(
        self, command: str, args: tuple[str, ...], env: dict[str, str], cwd: str, policy: Policy
    ) -> None:
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.policy = policy
        self.turns: dict[str, Turn] = {}
        self.session_cwds: dict[str, str] = {}
        self.read_only_sessions: set[str] = set()  # sessions of agents that may not edit files
        self.active = 0
        self.retired = False
        self.broken = False
        self.agent_name: str | None = None
        self.can_resume = False
        self.takes_images = False
        self.can_load = False
        self.can_close = False
        self.conn: Any = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._stderr_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else -1

    @property
    def alive(self) -> bool:
        return (
            self._proc is not None and self._proc.returncode is None and not self.broken and not self._closed
        )

    @property
    def usable(self) -> bool:
        return self.alive and not self.retired

    def cwd_of(self, session_id: str) -> str:
        return self.session_cwds.get(session_id, self.cwd)

    async def start(self, sdk: Any, timeout: float) -> None:
        """Spawn the program and ``initialize``. Raises
        :class:`~workflow_mcp.providers.registry.ProviderStartError` when it cannot start."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: closing kills its children too
                limit=_STDOUT_LIMIT,
            )
        except OSError as exc:
            raise ProviderStartError(f"the ACP agent {self.command!r} could not start: {exc}") from exc
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        if self._proc.stdout is None:  # pragma: no cover - asked for a pipe above
            raise ProviderStartError(f"the ACP agent {self.command!r} has no standard output")
        self.conn = sdk.connect_to_agent(AgentClient(self), self._proc.stdin, DepthGuard(self._proc.stdout))
        schema = importlib.import_module("acp.schema")
        try:
            init = await asyncio.wait_for(
                self.conn.initialize(
                    protocol_version=sdk.PROTOCOL_VERSION,
                    client_capabilities=schema.ClientCapabilities(
                        fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
                        terminal=False,
                    ),
                    client_info=schema.Implementation(
                        name="workflow-mcp", version=dist_version("workflow-mcp") or "0"
                    ),
                ),
                timeout,
            )
        except TimeoutError as exc:
            raise ProviderStartError(
                f"the ACP agent {self.command!r} did not initialize within {timeout:g} s"
            ) from exc
        except (ConnectionError, EOFError, BrokenPipeError) as exc:
            await self.settle()
            raise ProviderStartError(f"the ACP agent {self.command!r} {self.describe_exit()}") from exc
        except sdk.RequestError as exc:
            raise ProviderStartError(
                f"the ACP agent {self.command!r} refused initialize: {error_detail(exc)}"
            ) from exc
        info = getattr(init, "agent_info", None)
        self.agent_name = getattr(info, "name", None) or None
        caps = getattr(init, "agent_capabilities", None)
        sessions = getattr(caps, "session_capabilities", None)
        self.can_load = bool(getattr(caps, "load_session", False))
        self.can_resume = getattr(sessions, "resume", None) is not None
        self.can_close = getattr(sessions, "close", None) is not None
        self.takes_images = bool(getattr(getattr(caps, "prompt_capabilities", None), "image", False))

    async def _drain_stderr(self) -> None:
        """Keep the last few KiB of the agent's stderr (for failure messages); never let the pipe
        fill up and block the agent."""
        assert self._proc is not None and self._proc.stderr is not None
        with contextlib.suppress(Exception):
            while chunk := await self._proc.stderr.read(4096):
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > _STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())

    async def settle(self) -> None:
        """After the connection broke: wait (bounded) for the exit and the rest of its stderr."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                if self._proc is not None:
                    await self._proc.wait()
                if self._stderr_task is not None:
                    await asyncio.shield(self._stderr_task)

    def describe_exit(self) -> str:
        code = self._proc.returncode if self._proc is not None else None
        lines = b"".join(self._stderr).decode("utf-8", "replace").strip().splitlines()
        # The last line that says something: not a stack frame or the tail of an error object a
        # node agent prints after its error (``    at main (file://…)``, ``  errno: -2``, ``}``).
        told = [line for line in lines if not _TRACE_LINE.match(line)] or lines
        last = f": {told[-1][:300]}" if told else ""
        state = f"exited with code {code}" if code is not None else "closed its connection"
        return f"{state}{last}"

    async def close(self) -> None:
        """Close the connection and kill the whole process group: TERM, then KILL after a bound
        (the node wrappers spawn native children that outlive a killed parent)."""
        if self._closed:
            return
        self._closed = True
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), _CLOSE_TIMEOUT_S)
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        kill_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), _CLOSE_TIMEOUT_S)
        except TimeoutError:
            kill_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), _CLOSE_TIMEOUT_S)
        kill_group(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task


class DepthGuard(asyncio.StreamReader):
    """An ACP agent's stdout as the SDK reads it (``readuntil``): one whole line at a time, and a line
    nested too deeply for Python's JSON reader (far past ``MAX_VALUE_DEPTH``) replaced — a response by
    an error response to the same request naming the limit, anything else by an empty line. The SDK
    drops a line it cannot parse, so without this a reply nested 100,000 levels deep left its request
    (``session/prompt``: the whole call) waiting forever. A :class:`asyncio.StreamReader` (the SDK
    takes no other) whose reads go to ``stream``."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        super().__init__()
        self._stream = stream

    async def readuntil(self, separator: Any = b"\n") -> bytes:
        """The next line, whole however long (the stream's buffer limit only sets the chunk size).

        Raises:
            asyncio.IncompleteReadError: the stream ended; ``partial`` is the rest, checked the same way.
        """
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._stream.readuntil(separator))
                return _guarded(b"".join(chunks))
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._stream.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                chunks.append(exc.partial)
                raise asyncio.IncompleteReadError(_guarded(b"".join(chunks)), None) from None

    async def readexactly(self, n: int) -> bytes:
        return await self._stream.readexactly(n)

    async def readline(self) -> bytes:
        try:
            return await self.readuntil()
        except asyncio.IncompleteReadError as exc:
            return exc.partial

    def at_eof(self) -> bool:
        return self._stream.at_eof()


def _guarded(line: bytes) -> bytes:
    """``line``, or what stands in for it when it is nested too deeply to read (see :class:`DepthGuard`).
    A line with fewer brackets than the limit cannot be that deep, so most lines cost two counts."""
    if line.count(b"[") + line.count(b"{") <= MAX_VALUE_DEPTH:
        return line
    try:
        json.loads(line)
    except RecursionError:
        pass
    except ValueError:
        return line  # not JSON: the SDK's to report
    else:
        return line
    head = top_level(line.decode("utf-8", "replace"))
    if head is None or "id" not in head or head.get("method") is not None:
        return b"\n"  # a notification or a request of the agent's: nobody waits for an answer
    error = {"code": -32603, "message": str(NestingError("the ACP agent's answer"))}
    return json.dumps({"jsonrpc": "2.0", "id": head["id"], "error": error}).encode() + b"\n"


def kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(pid, sig)
        else:  # pragma: no cover - Windows has no process groups of this kind
            os.kill(pid, sig)


_TRACE_LINE: Final = re.compile(r"^\s+(at\s|[\w$]+:\s)|^\s*[}\])]+[,;]?\s*$")
"""A stack frame (``    at f (file:1:2)``), an error object's field (``  errno: -2``) or a closing bracket."""


def error_detail(exc: Any) -> str:
    """The agent's error message; an upstream JSON error body is reduced to its ``error.message``."""
    data = getattr(exc, "data", None)
    message = str(exc)
    if isinstance(data, Mapping):
        inner = data.get("message") or data.get("details")
        if isinstance(inner, str) and inner:
            message = inner
    return upstream_message(message)


class ProcessPool:
    """The agent processes of one ``acp`` provider and the sessions they keep.

    With ``reuse`` one process takes up to ``max_sessions`` concurrent sessions and more are
    started as the fan-out grows; without it every call gets a process of its own, closed after it.
    A completed schema call's session is remembered (``remember``; at most 256, the oldest closed)
    so a re-ask continues it. ``env`` gives the environment of a new process (read at spawn time).
    Every background close and cancel is owned here and bounded by :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        command: str,
        args: tuple[str, ...],
        env: Callable[[], dict[str, str]],
        cwd: str | None,
        policy: Policy,
        max_sessions: int,
        reuse: bool,
        start_timeout_s: float,
        rpc_timeout_s: float,
    ) -> None:
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.policy = policy
        self.max_sessions = max_sessions
        self.reuse = reuse
        self.start_timeout_s = start_timeout_s
        self.rpc_timeout_s = rpc_timeout_s
        self.agent_name: str | None = None
        """The agent's own name, from the first ``initialize``."""
        self._procs: list[AgentProcess] = []  # processes taking new sessions
        self._spawned: set[AgentProcess] = set()  # every process not yet closed
        self._spawn_lock = asyncio.Lock()
        self._remembered: OrderedDict[tuple[str, str], tuple[AgentProcess, str]] = OrderedDict()
        self._idle: OrderedDict[str, AgentProcess] = OrderedDict()
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def running_sessions(self) -> list[str]:
        """Ids of the sessions with a turn running now."""
        return [session for proc in self._spawned for session in proc.turns]

    @property
    def pids(self) -> list[int]:
        """Process ids of the agent processes alive now (their process groups have the same ids)."""
        return [p.pid for p in self._spawned if p.alive]

    def turn_of(self, session_id: str) -> tuple[AgentProcess, Turn] | None:
        """The process and the turn running in ``session_id``, if one runs."""
        for proc in self._spawned:
            turn = proc.turns.get(session_id)
            if turn is not None:
                return proc, turn
        return None

    def take_remembered(self, key: tuple[str, str]) -> tuple[AgentProcess, str] | None:
        """The remembered session of ``key`` (run id, agent id), its process's slot taken."""
        known = self._remembered.pop(key, None)
        if known is None or not known[0].usable:
            return None
        proc, session_id = known
        self._idle.pop(session_id, None)
        proc.active += 1
        return known

    def take_idle(self, session_id: str) -> AgentProcess | None:
        """The process keeping idle session ``session_id``, its slot taken."""
        idle = self._idle.pop(session_id, None)
        if idle is None or not idle.usable or session_id in idle.turns:
            return None
        idle.active += 1
        return idle

    async def acquire(self) -> AgentProcess:
        """A process with a free session slot (taken), started when none has one. Raises
        :class:`~workflow_mcp.providers.registry.ProviderStartError` when it cannot start."""
        if not self.reuse:
            proc = await self._spawn()
            proc.active += 1
            return proc
        async with self._spawn_lock:
            for dead in [p for p in self._procs if not p.alive]:
                self._procs.remove(dead)
                self.background(self._close(dead))
            for proc in self._procs:
                if proc.usable and proc.active < self.max_sessions:
                    proc.active += 1
                    return proc
            proc = await self._spawn()
            proc.active += 1
            self._procs.append(proc)
            return proc

    def release(self, proc: AgentProcess, session_id: str, key: tuple[str, str], *, remember: bool) -> None:
        """Give back ``proc``'s slot; keep ``session_id`` for a re-ask of ``key`` when
        ``remember``, else close it; close the process when it is done with."""
        proc.active = max(0, proc.active - 1)
        if session_id:
            if remember and self.reuse and proc.usable:
                self._remembered[key] = (proc, session_id)
                self._remembered.move_to_end(key)
                self._idle[session_id] = proc
                while len(self._remembered) > _REMEMBERED_SESSIONS:
                    _, (old_proc, old_session) = self._remembered.popitem(last=False)
                    self.forget(old_proc, old_session)
            elif self.reuse and proc.usable:
                self.forget(proc, session_id)
        if not self.reuse or (proc.retired and proc.active == 0) or not proc.alive:
            if proc in self._procs:
                self._procs.remove(proc)
            self.background(self._close(proc))

    def forget(self, proc: AgentProcess, session_id: str) -> None:
        """Close an idle session the agent keeps in memory (when it can close sessions)."""
        self._idle.pop(session_id, None)
        proc.session_cwds.pop(session_id, None)
        proc.read_only_sessions.discard(session_id)
        if proc.can_close and proc.usable:
            self.background(_quietly(proc.conn.close_session(session_id=session_id), self.rpc_timeout_s))

    def background(self, coro: Awaitable[Any]) -> None:
        """Run ``coro`` as a task this pool owns (awaited, bounded, by :meth:`aclose`)."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Stop every process, killing each whole process group (idempotent)."""
        self._procs = []
        self._remembered.clear()
        self._idle.clear()
        # Closing the processes first ends every pending request, so background work (cancels,
        # session closes, closes already under way) finishes at once; then wait for it, bounded.
        await asyncio.gather(*(p.close() for p in list(self._spawned)), return_exceptions=True)
        tasks = list(self._background)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_CLOSE_TIMEOUT_S * 2)
            for task in pending:
                task.cancel()
        self._spawned.clear()

    async def _spawn(self) -> AgentProcess:
        proc = AgentProcess(self.command, self.args, self.env(), self.cwd or os.getcwd(), self.policy)
        self._spawned.add(proc)
        try:
            await proc.start(importlib.import_module("acp"), self.start_timeout_s)
        except BaseException:
            await self._close(proc)
            raise
        self.agent_name = self.agent_name or proc.agent_name
        return proc

    async def _close(self, proc: AgentProcess) -> None:
        try:
            await proc.close()
        finally:
            self._spawned.discard(proc)


async def _quietly(call: Awaitable[Any], timeout: float) -> None:
    """A best-effort request nobody waits for: bounded, its errors dropped."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(call, timeout)
