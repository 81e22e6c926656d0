"""The per-client ledger behind the HTTP guard's fair shares, on a hand-moved clock: requests and
sessions are counted per principal, reservations are released, idle sessions expire, refusals name the
limit and only the caller's count."""

from __future__ import annotations

from workflow_mcp.server._shares import ClientLedger, Shares, fair_share


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ledger(clock: Clock) -> ClientLedger:
    return ClientLedger(
        Shares(client_requests=2, sessions=3, client_sessions=2, session_idle_s=60), clock=clock
    )


def test_fair_shares_split_a_cap_equally_and_never_fall_below_one() -> None:
    assert [fair_share(16, n) for n in (0, 1, 2, 3, 40)] == [16, 16, 8, 5, 1]


def test_requests_are_counted_per_client() -> None:
    book = ledger(Clock())
    assert book.enter("a") is None and book.enter("a") is None
    refused = book.enter("a")
    assert refused is not None and refused.status == 429 and "--max-client-connections 2" in refused.message
    assert "already has 2" in refused.message
    assert book.enter("b") is None
    book.leave("a")
    assert book.enter("a") is None and book.requests_of("b") == 1


def test_sessions_are_counted_from_opening_until_deleted_forgotten_or_idle() -> None:
    clock = Clock()
    book = ledger(clock)
    assert book.open_session("a") is None
    assert book.open_session("a") is None  # two reservations: the share is taken while they open
    refused = book.open_session("a")
    assert refused is not None and refused.error == "client_session_limit" and "holds 2" in refused.message
    book.opened("a", "s1")
    book.opened("a", None)  # the second request opened nothing
    assert book.sessions_of("a") == 1 and book.open_session("a") is None
    book.opened("a", "s2")
    # Only the owner's requests count; a DELETE ends it, a 404 forgets it.
    assert not book.session_request("b", "s1")
    assert book.session_request("a", "s1")
    book.session_response("s1", status=200, deleted=True)
    assert book.session_request("a", "s2")
    book.session_response("s2", status=404, deleted=False)
    assert book.sessions_of("a") == 0
    # An idle session expires; one with a request in flight (an open stream) does not.
    for sid in ("s3", "s4"):
        assert book.open_session("a") is None
        book.opened("a", sid)
    assert book.session_request("a", "s4")  # a stream stays open
    clock.now += 61
    assert book.open_session("a") is None and book.sessions_of("a") == 1


def test_the_server_wide_session_limit_names_only_the_callers_count() -> None:
    book = ledger(Clock())
    for owner, sid in (("a", "s1"), ("a", "s2"), ("b", "s3")):
        assert book.open_session(owner) is None
        book.opened(owner, sid)
    refused = book.open_session("b")
    assert refused is not None and refused.status == 503 and refused.error == "session_limit"
    assert "--max-sessions 3" in refused.message and "this client holds 1" in refused.message
    assert "2" not in refused.message
