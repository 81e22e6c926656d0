"""The server's ``subscriptions/listen`` fan-out, scoped by who may see a run (:class:`OwnedBus`), and
the handshake-era ``resources/subscribe`` subscriptions (:class:`ResourceSubscribers`).

The SDK's listen handler honours any resource URI a client names and delivers every event the bus
carries that matches its filter; the bus is what decides who may hear of a run. A listener is tied to
the principal that opened the stream (read when the stream subscribes, inside the request); an event
about a run carries the run's owner and reaches only listeners whose principal may see that run
(:meth:`Principal.may_see`), so a client never learns that another client's run exists, started or
changed — neither through ``resources/updated`` for a URI it guessed nor through
``resources/list_changed``. Events published without an owner (the SDK's own, e.g. a changed tool list)
reach everyone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio.lowlevel
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ServerEvent

from ._policy import Principal

__all__ = ["OwnedBus", "ResourceSubscribers", "connection_of"]

logger = logging.getLogger(__name__)


class OwnedBus:
    """An in-process ``SubscriptionBus`` whose listeners belong to principals.

    ``caller`` returns the principal of the request being served (``None``: unauthenticated, which
    hears only ownerless events).
    """

    def __init__(self, caller: Callable[[], Principal | None]) -> None:
        self._caller = caller
        self._listeners: dict[object, tuple[Principal | None, Callable[[ServerEvent], None]]] = {}

    async def publish(self, event: ServerEvent) -> None:
        """Deliver ``event`` to every listener (an event about no run)."""
        await self._deliver(event, lambda principal: True)

    async def publish_owned(self, event: ServerEvent, owner: str | None) -> None:
        """Deliver ``event``, about a run of ``owner`` (``None``: the local user), to the listeners that
        may see that run."""
        await self._deliver(event, lambda principal: principal is not None and principal.may_see(owner))

    async def _deliver(self, event: ServerEvent, hears: Callable[[Principal | None], bool]) -> None:
        for principal, listener in list(self._listeners.values()):
            if not hears(principal):
                continue
            try:
                listener(event)
            except Exception:  # fan-out boundary: one listener must not starve the others
                logger.exception("subscription listener raised; continuing")
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Register ``listener`` for the caller of the current request; returns its unsubscribe."""
        token = object()
        self._listeners[token] = (self._caller(), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


def connection_of(session: ServerSession) -> Connection:
    """The client connection a request's ``session`` belongs to. The SDK builds a new
    :class:`ServerSession` for every request, so only the connection names one client across requests;
    it keeps the connection on the session, and documents ``connection.exit_stack`` as the place for
    per-connection cleanup.

    Raises:
        TypeError: this SDK's session holds no connection (an SDK this server was not built for).
    """
    connection = getattr(session, "_connection", None)
    if not isinstance(connection, Connection):
        raise TypeError(
            "this mcp SDK's ServerSession holds no Connection; install the mcp version pyproject.toml names"
        )
    return connection


class ResourceSubscribers:
    """Who asked for ``notifications/resources/updated`` on which resource URI (``resources/subscribe``).

    Each subscription belongs to a client connection. It ends on ``resources/unsubscribe``, when
    sending to it fails, or when its connection closes (a client that left, an idle HTTP session the
    SDK closed), and a URI with no subscriber left is forgotten: a long-running server holds as many
    subscriptions as its live clients hold, never the history of every client it served.
    """

    def __init__(self) -> None:
        self._by_uri: dict[str, dict[Connection, None]] = {}  # insertion-ordered: updates go out in order
        self._by_connection: dict[Connection, set[str]] = {}

    def __len__(self) -> int:
        """How many subscriptions are held (connection and URI pairs)."""
        return sum(len(uris) for uris in self._by_connection.values())

    @property
    def uris(self) -> int:
        """How many URIs have a subscriber."""
        return len(self._by_uri)

    def add(self, connection: Connection, uri: str) -> None:
        """Subscribe ``connection`` to ``uri`` (again: no change)."""
        if connection not in self._by_connection:
            self._by_connection[connection] = set()
            connection.exit_stack.callback(self.drop, connection)
        self._by_connection[connection].add(uri)
        self._by_uri.setdefault(uri, {})[connection] = None

    def discard(self, connection: Connection, uri: str) -> None:
        """End ``connection``'s subscription to ``uri`` (none: no change)."""
        uris = self._by_connection.get(connection)
        if uris is not None:
            uris.discard(uri)
        subscribers = self._by_uri.get(uri)
        if subscribers is not None:
            subscribers.pop(connection, None)
            if not subscribers:
                del self._by_uri[uri]

    def drop(self, connection: Connection) -> None:
        """End every subscription of ``connection`` (its client is gone)."""
        for uri in self._by_connection.pop(connection, set()):
            self.discard(connection, uri)

    def of(self, uri: str) -> list[Connection]:
        """The connections subscribed to ``uri``, oldest first."""
        return list(self._by_uri.get(uri, ()))
