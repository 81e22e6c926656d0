"""Answers nested far past ``MAX_VALUE_DEPTH`` (a model replying ``[[[[…`` 100,000 levels deep, an
agent program's output document, an endpoint's response body) fail the call with an error naming the
limit, through the same paths as any unreadable answer — never a ``RecursionError`` from Python's JSON
reader ("maximum recursion depth exceeded") ending the run as an internal error."""

from __future__ import annotations

import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp._nesting import MAX_VALUE_DEPTH, NestingError, loads
from workflow_mcp.providers._kit import upstream_message
from workflow_mcp.providers.base import AgentExecutionError, AgentRequest
from workflow_mcp.providers.cli import CLIProvider
from workflow_mcp.providers.policy import DEFAULT_POLICY
from workflow_mcp.providers.schema import parse_answer

from helpers import arun, call_provider, finish, start

pytestmark = pytest.mark.timeout(60)

LEVELS = 100_000
DEEP = "[" * LEVELS + "]" * LEVELS
LIMIT = f"nested deeper than {MAX_VALUE_DEPTH} levels"
SCHEMA = {"type": "object"}


def test_loads_names_the_limit_instead_of_recursing() -> None:
    with pytest.raises(NestingError, match=rf"the reply is {LIMIT}.*MAX_VALUE_DEPTH"):
        loads('{"a": ' + DEEP + "}", what="the reply")
    assert isinstance(NestingError("x"), ValueError)  # every `except ValueError` reader handles it
    assert loads("[[1]]") == [[1]]


@pytest.mark.parametrize("reply", [DEEP, "Here it is:\n```json\n" + DEEP + "\n```", "{" + '"a":{' * LEVELS])
def test_a_reply_nested_past_the_limit_is_no_structured_answer_and_says_why(reply: str) -> None:
    ok, value, problem = parse_answer(reply)
    assert (ok, value) == (False, None)
    assert problem is not None and LIMIT in problem and "recursion" not in problem


def test_an_upstream_error_body_nested_past_the_limit_is_kept_as_text() -> None:
    assert upstream_message(DEEP) == DEEP


def _program(tmp_path: Path, stdout: str) -> list[str]:
    data = tmp_path / "answer.txt"
    data.write_text(stdout, encoding="utf-8")
    script = tmp_path / "agent.py"
    script.write_text(f"import sys\nsys.stdin.read()\nsys.stdout.write(open({str(data)!r}).read())\n")
    return [sys.executable, str(script)]


def _ask(cli: CLIProvider, **request: Any) -> Any:
    async def scenario() -> Any:
        try:
            return await call_provider(cli, AgentRequest(**{"prompt": "hi", "label": "l", **request}))
        finally:
            await cli.aclose()

    return arun(scenario())


def _cli(command: list[str], **settings: Any) -> CLIProvider:
    return CLIProvider.create({"command": command, **settings}, policy=DEFAULT_POLICY, source="test.toml")


def test_a_program_whose_json_document_nests_past_the_limit_fails_naming_it(tmp_path: Path) -> None:
    command = _program(tmp_path, '{"result": "x", "structured_output": {"a": ' + DEEP + "}}")
    with pytest.raises(AgentExecutionError, match=rf'output = "json".*{LIMIT}'):
        _ask(_cli(command, output="json", answer_path="result", structured_path="structured_output"))


def test_a_jsonl_line_nested_past_the_limit_is_passed_over_like_any_unreadable_line(tmp_path: Path) -> None:
    command = _program(tmp_path, '{"result": ' + DEEP + '}\n{"result": "done"}\n')
    result, _ = _ask(_cli(command, output="jsonl", answer_path="result"))
    assert result.text == "done"


def test_a_schema_call_answered_past_the_limit_is_asked_again_then_fails_naming_it(tmp_path: Path) -> None:
    result, events = _ask(_cli(_program(tmp_path, DEEP), json_retries=1), schema=SCHEMA)
    assert not result.has_structured
    assert LIMIT in (result.message or "")
    assert [e.data.get("reask") for e in events if e.data.get("reask")] == [1]


# -- through a whole run: the endpoint's body itself nested past the limit -----------------------


class _DeepBody(http.server.BaseHTTPRequestHandler):
    """A Chat Completions endpoint whose every response carries a 100,000-level array beside a
    well-formed answer: the SDK's own JSON reader is what meets it."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = (
            '{"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
            '"finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}], "extra": '
            + DEEP
            + "}"
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def deep_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DeepBody)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_endpoint_response_nested_past_the_limit_fails_the_call_naming_it(
    deep_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai", reason="the openai extra is not installed")
    from workflow_mcp.providers.config import ProviderConfig
    from workflow_mcp.providers.openai_compat import OpenAIProvider
    from workflow_mcp.providers.registry import register_provider, unregister_provider
    from workflow_mcp.providers.routing import build_router

    monkeypatch.setenv("DEEP_KEY", "sk-deep")
    register_provider("openai", OpenAIProvider)
    settings = {"model": "m", "base_url": deep_endpoint, "api_key_env": "DEEP_KEY", "max_retries": 0}

    async def scenario() -> Any:
        router = build_router(provider="openai", config=ProviderConfig(settings={"openai": settings}))
        try:
            body = (
                "try { await agent('go', { label: 'a' }); return 'resolved' } catch (e) { return String(e) }"
            )
            return await finish(start(body, provider=router))
        finally:
            await router.aclose()

    try:
        outcome = arun(scenario())
    finally:
        unregister_provider("openai")
    assert outcome.status == "completed", outcome.error
    assert LIMIT in outcome.result and "its response" in outcome.result
    assert "recursion" not in outcome.result
    assert [e.type for e in outcome.events if e.type.startswith("agent.")][-1] == "agent.failed"


# -- an ACP agent whose JSON-RPC lines nest past the limit ---------------------------------------

RAW_ACP_AGENT = r"""
import json, sys
DEEP = "[" * 100_000 + "]" * 100_000
def send(text): sys.stdout.write(text + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, ident = msg.get("method"), msg.get("id")
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}}))
    elif method == "session/new":
        send(json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": "s1"}}))
    elif method == "session/prompt":
        prompt = msg["params"]["prompt"][0]["text"]
        if prompt.startswith("deep reply"):
            send('{"jsonrpc": "2.0", "id": %s, "result": {"stopReason": "end_turn", "x": %s}}' % (json.dumps(ident), DEEP))
        else:  # a deep notification first, then the answer
            send('{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "x": %s}}' % DEEP)
            update = {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "fine"}}}
            send(json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": update}))
            send(json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"stopReason": "end_turn"}}))
"""


def test_an_acp_agent_reply_nested_past_the_limit_fails_its_call_at_once_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("acp", reason="the acp extra is not installed")
    from workflow_mcp.providers.config import ProviderConfig
    from workflow_mcp.providers.routing import build_router

    agent = tmp_path / "agent.py"
    agent.write_text(RAW_ACP_AGENT)
    config = ProviderConfig(settings={"acp": {"command": sys.executable, "args": [str(agent)]}})
    body = """
const out = []
for (const prompt of ['deep reply', 'deep notice']) {
  try { out.push(await agent(prompt, { label: prompt })) } catch (e) { out.push('rejected: ' + String(e)) }
}
return out
"""

    async def scenario() -> Any:
        router = build_router(provider="acp", config=config, cwd=str(tmp_path))
        try:
            return await finish(start(body, provider=router), timeout=30)  # never the old wait forever
        finally:
            await router.aclose()

    outcome = arun(scenario())
    assert outcome.status == "completed", outcome.error
    deep, notice = outcome.result
    assert deep.startswith("rejected: Error: ") and LIMIT in deep and "recursion" not in deep
    failed = [e for e in outcome.events if e.type == "agent.failed"]
    assert (
        len(failed) == 1
        and LIMIT in str(failed[0].payload)
        and "the ACP agent's answer" in str(failed[0].payload)
    )
    assert notice == "fine"  # a notification too deep to read is passed over; the call goes on
