"""The scripted in-memory realm speaks the realm protocol to the engine as the Node worker does, without
Node; and the protocol's decoder turns every worker line into its value or names what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from workflow_mcp.providers import FakeProvider
from workflow_mcp.realm.channel import RealmChannel
from workflow_mcp.realm.messages import (
    AgentCallMessage,
    ChildEnded,
    Done,
    DoneError,
    Hello,
    Log,
    ProtocolError,
    Returned,
    WorkflowCallMessage,
    decode_worker_message,
)
from workflow_mcp.realm.scripted import AgentRejected, ScriptedRealm, ScriptedWorkflow
from workflow_mcp.realm.worker import RealmWorker

from helpers import run_scripted


@pytest.fixture(autouse=True)
def no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any Node process started by these tests fails them."""
    monkeypatch.setenv("WORKFLOW_MCP_NODE", "/nonexistent/node")


def test_both_realms_are_realm_channels() -> None:
    async def script(realm: ScriptedWorkflow) -> None:
        return None

    assert isinstance(ScriptedRealm(script), RealmChannel)
    # The Node worker's conformance is checked statically too (realm/worker.py, under TYPE_CHECKING).
    channel: type[RealmChannel] = RealmWorker
    assert all(callable(getattr(channel, name)) for name in ("post_text", "receive", "close", "stderr_tail"))


def test_a_scripted_workflow_runs_its_calls_phases_and_logs_through_the_engine() -> None:
    async def script(realm: ScriptedWorkflow) -> Any:
        realm.phase("Scan")
        realm.log("starting")
        first = await realm.agent("look", label="scan")
        rest = await realm.parallel(lambda: realm.agent("a"), lambda: realm.agent("b"), lambda: _plain())
        return [first, *rest, realm.args]

    outcome = run_scripted(script, provider=FakeProvider({"default": {"echo": True}}), args={"n": 1})
    assert outcome.status == "completed", outcome.error
    assert outcome.result == ["look", "a", "b", "plain", {"n": 1}]
    assert [e.payload["title"] for e in outcome.of("phase.started")] == ["Scan"]
    assert outcome.logs == ["starting"]
    assert outcome.of("agent.completed")[0].payload["label"] == "scan"
    assert [e.payload["phase"] for e in outcome.of("agent.queued")] == ["Scan", "Scan", "Scan"]


async def _plain() -> str:
    return "plain"


def test_the_engine_refuses_the_call_past_the_1000_call_cap() -> None:
    async def script(realm: ScriptedWorkflow) -> Any:
        done = await realm.parallel(*(lambda i=i: realm.agent(f"n{i}") for i in range(1000)))
        try:
            await realm.agent("one more")
        except AgentRejected as exc:
            return [len(done), exc.message]
        return "admitted"

    outcome = run_scripted(script, provider=FakeProvider({"default": {"text": "ok"}}))
    count, message = outcome.result
    assert count == 1000
    assert "call cap reached" in message and "1,000" in message


def test_what_the_script_throws_fails_the_run_with_its_message() -> None:
    async def script(realm: ScriptedWorkflow) -> Any:
        await realm.agent("a")
        raise RuntimeError("the script broke")

    outcome = run_scripted(script)
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "RuntimeError"
    assert outcome.failure["message"] == "the script broke"


def test_a_failure_in_one_parallel_thunk_is_raised_once_every_thunk_has_ended() -> None:
    async def bad() -> Any:
        raise ValueError("thunk failed")

    async def script(realm: ScriptedWorkflow) -> Any:
        try:
            await realm.parallel(lambda: realm.agent("a"), bad, lambda: realm.agent("b"))
        except ValueError as exc:
            return str(exc)
        return "no failure"

    provider = FakeProvider({"default": {"echo": True}})
    outcome = run_scripted(script, provider=provider)
    assert outcome.result == "thunk failed"
    assert sorted(r.prompt for r in provider.calls) == ["a", "b"]


def test_a_final_value_that_is_not_json_fails_the_run() -> None:
    async def script(realm: ScriptedWorkflow) -> Any:
        return float("nan")

    outcome = run_scripted(script)
    assert outcome.status == "failed"
    assert outcome.failure["name"] == "ValueError"


# -- the decoder ----------------------------------------------------------------------------------

CALL = {"t": "call", "fn": "agent", "id": 1, "prompt": "p", "opts": {}, "label": "l", "phase": None,
        "child": None, "key": "v2:k", "canon": "{}"}  # fmt: skip


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ({"t": "hello", "protocol": 3, "node": "24.1.0"}, Hello(3, "24.1.0")),
        (CALL, AgentCallMessage(1, "p", {}, "l", None, None, "v2:k", "{}")),
        (
            {**CALL, "agentType": "worker"},
            AgentCallMessage(1, "p", {}, "l", None, None, "v2:k", "{}", "worker"),
        ),
        (
            {"t": "call", "fn": "workflow", "id": 2, "target": {"name": "c"}},
            WorkflowCallMessage(2, {"name": "c"}),
        ),
        ({"t": "log", "message": "m", "child": "c"}, Log("m", "c")),
        ({"t": "child", "name": "c", "ok": True}, ChildEnded("c", True)),
        ({"t": "returned"}, Returned()),
        ({"t": "done", "ok": True, "value": "1"}, Done(True, "1")),
        (
            {"t": "done", "ok": False, "error": {"name": "E", "message": "m", "stack": "s"}},
            Done(False, error=DoneError("E", "m", "s")),
        ),
    ],
)
def test_each_worker_message_decodes_to_its_value(line: dict[str, Any], value: object) -> None:
    assert decode_worker_message(line) == value


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ([1], "not a JSON object"),
        ({"t": "console", "level": "log", "message": "m"}, "unknown worker message type 'console'"),
        ({"t": "budget"}, "unknown worker message type 'budget'"),
        ({**CALL, "id": True}, "'id'"),
        ({**CALL, "id": 1.5}, "'id'"),
        ({k: v for k, v in CALL.items() if k != "child"}, "'child'"),
        ({**CALL, "agentType": 5}, "'agentType'"),
        ({**CALL, "fn": "eval"}, "unknown call 'eval'"),
        ({"t": "call", "fn": "workflow", "id": 2, "target": {}}, "without a name or scriptPath"),
        ({"t": "done", "ok": False, "error": {"name": "E"}}, "no message text"),
        ({"t": "dropped", "lines": "3"}, "'lines'"),
    ],
)
def test_a_malformed_worker_message_is_a_protocol_error_naming_the_problem(line: Any, named: str) -> None:
    with pytest.raises(ProtocolError, match=named.replace("(", r"\(")):
        decode_worker_message(line)
