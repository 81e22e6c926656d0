"""Each HTTP client's fair share of the server: open requests (connections and streams) and
Streamable HTTP sessions, counted per principal (:class:`ClientLedger`).

uvicorn bounds connections in total (``--max-connections``) and the SDK's session manager bounds
sessions in total and expires idle ones, but neither knows who a connection belongs to, so one client
holding SSE streams or opening sessions could take everything. The HTTP guard asks the ledger after it
has authenticated a request:

* **requests** — every request a principal has in flight (a tool call, a long poll, a
  ``subscriptions/listen`` stream, a handshake-era GET stream) counts until its response ends; beyond
  :attr:`Shares.client_requests` the request is answered 429 ``client_connection_limit``;
* **sessions** — a handshake-era (pre-2026-07-28) request without ``Mcp-Session-Id`` may open a
  session; it is admitted only while the server holds fewer than :attr:`Shares.sessions` (else 503
  ``session_limit``) and the principal fewer than :attr:`Shares.client_sessions` (else 429
  ``client_session_limit``), counting sessions being opened. A session is counted from the successful
  response that names it until the client deletes it, the server answers 404 for it (the SDK forgot
  it), or it has had no request in flight for :attr:`Shares.session_idle_s` — the SDK's own idle timer,
  given the same value, which closes it then (the ledger's clock starts after the SDK's, so it never
  counts fewer sessions than the SDK holds). 2026-07-28 requests carry no session.

Refusals name the limit, the option that sets it and the caller's own count — never another client's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ClientLedger", "Refusal", "Shares", "fair_share"]


def fair_share(total: int, clients: int) -> int:
    """An equal share of ``total`` among ``clients`` (at least 1): the per-client default of a global
    cap, so that every configured client can always get its share whatever the others hold."""
    return max(1, total // max(1, clients))


@dataclass(frozen=True)
class Shares:
    """The caps (``workflow-mcp serve`` options in parentheses)."""

    client_requests: int
    """Requests one principal may have in flight (``--max-client-connections``)."""
    sessions: int
    """Handshake-era sessions the server holds (``--max-sessions``)."""
    client_sessions: int
    """Sessions one principal holds (``--max-client-sessions``)."""
    session_idle_s: float
    """Seconds without a request in flight after which a session is closed (``--session-idle-timeout``)."""


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: HTTP ``status``, an ``error`` code and the message."""

    status: int
    error: str
    message: str


@dataclass
class _Session:
    owner: str
    in_flight: int = 0
    last_active: float = 0.0


@dataclass
class ClientLedger:
    """What each principal holds now (module docstring). Single-threaded: used on the event loop."""

    shares: Shares
    clock: Callable[[], float] = time.monotonic
    _requests: dict[str, int] = field(default_factory=dict)
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _opening: dict[str, int] = field(default_factory=dict)

    # -- requests ------------------------------------------------------------------------------
    def enter(self, owner: str) -> Refusal | None:
        """Count a request of ``owner``, or say why it is refused (then nothing is counted)."""
        held = self._requests.get(owner, 0)
        limit = self.shares.client_requests
        if held >= limit:
            return Refusal(
                429,
                "client_connection_limit",
                f"this client already has {held} requests or streams open, its share of this server "
                f"(--max-client-connections {limit}); close a stream or wait for a call to end, then retry",
            )
        self._requests[owner] = held + 1
        return None

    def leave(self, owner: str) -> None:
        held = self._requests.get(owner, 0) - 1
        if held > 0:
            self._requests[owner] = held
        else:
            self._requests.pop(owner, None)

    def requests_of(self, owner: str) -> int:
        return self._requests.get(owner, 0)

    # -- sessions ------------------------------------------------------------------------------
    def open_session(self, owner: str) -> Refusal | None:
        """Reserve room for a session ``owner``'s request may open, or say why not. A reservation
        ends with :meth:`opened` (with the new session's id, or ``None``)."""
        self._expire()
        mine = self.sessions_of(owner) + self._opening.get(owner, 0)
        total = len(self._sessions) + sum(self._opening.values())
        idle = f"{self.shares.session_idle_s:g}"
        if mine >= self.shares.client_sessions:
            return Refusal(
                429,
                "client_session_limit",
                f"this client already holds {mine} MCP sessions, its share of this server "
                f"(--max-client-sessions {self.shares.client_sessions}); end one (HTTP DELETE with its "
                f"Mcp-Session-Id) or let it expire ({idle} s without a request), then retry",
            )
        if total >= self.shares.sessions:
            return Refusal(
                503,
                "session_limit",
                f"this server holds its maximum of MCP sessions (--max-sessions {self.shares.sessions}); "
                f"this client holds {mine}. Retry once sessions end or expire ({idle} s without a request)",
            )
        self._opening[owner] = self._opening.get(owner, 0) + 1
        return None

    def opened(self, owner: str, session_id: str | None) -> None:
        """End a reservation of :meth:`open_session`; ``session_id`` names the session it opened."""
        left = self._opening.get(owner, 0) - 1
        if left > 0:
            self._opening[owner] = left
        else:
            self._opening.pop(owner, None)
        if session_id is not None:
            self._sessions[session_id] = _Session(owner, last_active=self.clock())

    def session_request(self, owner: str, session_id: str) -> bool:
        """Note a request of ``owner`` in ``session_id``; ``False`` when it is not ``owner``'s session
        (the SDK then refuses it; nothing is counted)."""
        session = self._sessions.get(session_id)
        if session is None or session.owner != owner:
            return False
        session.in_flight += 1
        return True

    def session_response(self, session_id: str, *, status: int | None, deleted: bool) -> None:
        """End a request noted by :meth:`session_request` that was answered ``status``; a successful
        DELETE, or a 404 (the SDK no longer knows the session), ends the session."""
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.in_flight -= 1
        session.last_active = self.clock()
        if status == 404 or (deleted and status is not None and status < 400):
            del self._sessions[session_id]

    def sessions_of(self, owner: str) -> int:
        return sum(1 for s in self._sessions.values() if s.owner == owner)

    def _expire(self) -> None:
        deadline = self.clock() - self.shares.session_idle_s
        for sid in [
            sid for sid, s in self._sessions.items() if s.in_flight <= 0 and s.last_active <= deadline
        ]:
            del self._sessions[sid]
