"""The codex provider's approval desk against an in-memory stand-in for the SDK's client (its
approval handler and message writer, called the way the SDK's reader thread calls them): what the
real app-server cannot be made to do on demand — a request for a thread no call runs, a request
arriving after its call ended, an SDK without the seam. The round trip through a real
``codex app-server`` is ``tests/integration/providers/test_codex_checkpoints.py``."""

from __future__ import annotations

import asyncio
from typing import Any

from workflow_mcp.providers.codex import _Approval, _ApprovalDesk, _Inbox

COMMAND = "item/commandExecution/requestApproval"


class Client:
    """What the desk uses of ``openai_codex``'s client: the handler and the writer."""

    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    def _approval_handler(self, method: str, params: Any) -> dict[str, Any]:
        return {"decision": "accept"}  # the SDK's default: accept everything

    def _write_message(self, payload: dict[str, Any]) -> None:
        self.written.append(payload)

    def server_request(self, request_id: int, method: str, params: dict[str, Any]) -> None:
        """What the SDK's reader does with a server request: the handler's value is the answer."""
        self._write_message({"id": request_id, "result": self._approval_handler(method, params)})


class Codex:
    def __init__(self, client: Any) -> None:
        self._client = client


def installed(ask: bool) -> tuple[_ApprovalDesk, Client]:
    desk, client = _ApprovalDesk(ask=ask), Client()
    assert desk.install(Codex(client))
    return desk, client


def test_under_ask_a_request_of_a_running_call_is_held_and_answered_when_the_call_decides() -> None:
    async def scenario() -> None:
        desk, client = installed(ask=True)
        arrived: asyncio.Queue[_Approval] = asyncio.Queue()
        desk.open("thread-1", asyncio.get_running_loop(), arrived.put_nowait)
        client.server_request(7, COMMAND, {"threadId": "thread-1", "command": "touch x"})
        assert client.written == []  # held back: nothing answered on the reader thread
        approval = await asyncio.wait_for(arrived.get(), 5)
        assert approval.request_id == 7 and approval.ask().command == "touch x"
        desk.answer(approval, "accept")
        assert client.written == [{"id": 7, "result": {"decision": "accept"}}]

    asyncio.run(scenario())


def test_a_request_of_a_thread_no_call_runs_is_declined_at_once() -> None:
    _, client = installed(ask=True)
    client.server_request(3, COMMAND, {"threadId": "nobody"})
    assert client.written == [{"id": 3, "result": {"decision": "decline"}}]


def test_a_request_reaching_a_call_that_has_ended_is_refused_and_none_is_left_open() -> None:
    async def scenario() -> None:
        desk, client = installed(ask=True)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        refused: list[int] = []
        inbox = _Inbox(queue, lambda approval: refused.append(approval.request_id))
        desk.open("thread-1", asyncio.get_running_loop(), inbox.put)
        client.server_request(1, COMMAND, {"threadId": "thread-1"})  # arrives, never read
        await asyncio.sleep(0)  # one loop turn: the delivery handed to the loop runs (no timed wait)
        inbox.close()
        inbox.put(_Approval(COMMAND, {"threadId": "thread-1"}))  # delivered after the end
        assert refused == [1, None] and queue.empty()

    asyncio.run(scenario())


def test_without_ask_every_approval_is_declined_at_once_and_a_permissions_request_gets_nothing() -> None:
    _, client = installed(ask=False)
    client.server_request(1, COMMAND, {"threadId": "t"})
    client.server_request(2, "item/fileChange/requestApproval", {"threadId": "t"})
    client.server_request(3, "item/permissions/requestApproval", {"threadId": "t"})
    assert [m["result"] for m in client.written] == [
        {"decision": "decline"},
        {"decision": "decline"},
        {"permissions": {}},
    ]


def test_ask_needs_the_sdks_handler_and_writer_and_says_so_without_them() -> None:
    class Bare:
        def _approval_handler(self, method: str, params: Any) -> dict[str, Any]:
            return {}

    assert not _ApprovalDesk(ask=True).install(Codex(Bare()))
    assert _ApprovalDesk(ask=False).install(Codex(Bare()))  # declining needs the handler alone


def test_a_request_names_what_it_asks_in_the_policys_terms() -> None:
    command = _Approval(COMMAND, {"threadId": "t", "reason": "make it", "command": "/bin/bash -lc 'ls'"})
    assert (command.ask().kind, command.ask().title, command.ask().command) == (
        "execute",
        "make it",
        "/bin/bash -lc 'ls'",
    )
    network = _Approval(
        COMMAND, {"threadId": "t", "networkApprovalContext": {"host": "example.com", "protocol": "https"}}
    )
    assert (network.ask().kind, network.ask().title) == ("fetch", "network access to example.com (https)")
    patch = _Approval("item/fileChange/requestApproval", {"threadId": "t", "grantRoot": "/etc"})
    assert (patch.ask().kind, patch.ask().paths) == ("edit", ("/etc",))
    assert _Approval("item/fileChange/requestApproval", {"threadId": "t"}).ask().paths == ()
