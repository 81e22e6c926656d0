"""The seam between a run and its realm: :class:`RealmChannel`.

Two implementations: :class:`~workflow_mcp.realm.worker.RealmWorker` (the Node worker process, what
every real run uses) and :class:`~workflow_mcp.realm.scripted.ScriptedRealm` (an in-memory twin whose
workflow is a Python script, so engine behaviour can be tested without Node). Messages are those of
:mod:`~workflow_mcp.realm.messages`: the host posts encoded JSON lines, the channel hands back decoded
values.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .messages import WorkerMessage

__all__ = ["RealmChannel"]


@runtime_checkable
class RealmChannel(Protocol):
    """One realm, as a run talks to it. Not thread-safe; used from one event loop."""

    #: The realm's V8 heap cap (MB) and its whole writable memory (MB); ``memory_limited`` says
    #: whether the latter is enforced (``RLIMIT_DATA``). Named in out-of-memory failures.
    heap_mb: int
    memory_mb: int
    memory_limited: bool

    def post_text(self, text: str) -> None:
        """Send one host message, already encoded (``encode_message``), without waiting. A realm that
        has ended ignores it (:meth:`receive` reports the end)."""

    async def receive(self) -> WorkerMessage | None:
        """The next message from the realm, or ``None`` once it has ended.

        Raises:
            RealmError: the realm broke the protocol (the message names how).
        """

    async def close(self) -> None:
        """End the realm (idempotent)."""

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the realm wrote about itself (Node's stderr), for failures."""

    @property
    def returncode(self) -> int | None:
        """The realm's exit status once it has ended (``None`` while it runs)."""
