"""The server's ``subscriptions/listen`` fan-out, scoped by who may see a run (:class:`OwnedBus`).

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
from mcp.server.subscriptions import ServerEvent

from ._policy import Principal

__all__ = ["OwnedBus"]

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
