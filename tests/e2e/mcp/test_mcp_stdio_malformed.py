"""Lines the SDK's stdio transport cannot parse still get an answer from a real ``workflow-mcp serve``
(raw lines over real stdio: the SDK client refuses to send them), and the server keeps serving."""

from __future__ import annotations

import json

import pytest

from workflow_mcp.definitions.profile import MAX_VALUE_DEPTH

from mcp_serve_kit import RawStdio, Site

pytestmark = pytest.mark.anyio

DEPTH = """export const meta = { name: 'depth', description: 'how deep its args nest' }
let d = 0
for (let v = args; Array.isArray(v); v = v[0]) d++
return d
"""


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def call_line(ident: int, arguments_json: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{{"name":"workflow_run",'
        f'"arguments":{arguments_json}}}}}'
    )


async def started(site: Site) -> RawStdio:
    site.workflow("depth", DEPTH)
    raw = await RawStdio.start(site)
    await raw.initialize()
    return raw


async def test_a_request_with_a_lone_surrogate_gets_invalid_params_naming_the_rule(site: Site) -> None:
    raw = await started(site)
    await raw.send_line(call_line(7, '{"name":"hello","provider":"fake","args":{"who":"\\ud800"}}'))
    answer = await raw.response(7)
    assert answer["error"]["code"] == -32602
    assert "lone-surrogate" in answer["error"]["message"]
    listed = await raw.request("tools/list", {})
    assert "workflow_run" in {t["name"] for t in listed["result"]["tools"]}
    assert (await raw.close())[0] == 0


async def test_a_line_that_is_not_json_gets_a_parse_error_and_the_server_keeps_serving(site: Site) -> None:
    raw = await started(site)
    await raw.send_line('{"jsonrpc":"2.0","id":8,"method":"tools/list"')  # cut short
    answer = await raw.response(None)
    assert answer["error"]["code"] == -32700
    await raw.send_line("[1, 2]")  # JSON, but no JSON-RPC object
    assert (await raw.response(None))["error"]["code"] == -32600
    await raw.send_line('{"jsonrpc":"2.0","id":9,"method":5}')
    assert (await raw.response(9))["error"]["code"] == -32600
    run = await raw.request(
        "tools/call",
        {"name": "workflow_run", "arguments": {"name": "depth", "provider": "fake", "waitMs": 20_000}},
    )
    assert run["result"]["structuredContent"]["status"] == "completed"
    assert (await raw.close())[0] == 0


@pytest.mark.parametrize("levels", [MAX_VALUE_DEPTH + 1, 5_000, 200_000])
async def test_args_nested_past_the_limit_get_invalid_params_naming_it(site: Site, levels: int) -> None:
    raw = await started(site)
    await raw.send_line(call_line(3, f'{{"name":"depth","provider":"fake","args":{nested(levels)}}}'))
    answer = await raw.response(3)
    assert answer["error"]["code"] == -32602
    assert f"deeper than {MAX_VALUE_DEPTH} levels" in answer["error"]["message"]
    assert "too-deep" in answer["error"]["message"]
    assert (await raw.request("tools/list", {}))["result"]["tools"]
    assert (await raw.close())[0] == 0


async def test_args_nested_exactly_at_the_limit_run(site: Site) -> None:
    """The SDK's parser stops at 200 levels of the whole message; the limit is the profile's."""
    raw = await started(site)
    await raw.send_line(
        call_line(4, f'{{"name":"depth","provider":"fake","waitMs":20000,"args":{nested(MAX_VALUE_DEPTH)}}}')
    )
    answer = await raw.response(4)
    assert answer["result"]["structuredContent"]["status"] == "completed", json.dumps(answer)[:500]
    assert answer["result"]["structuredContent"]["result"] == MAX_VALUE_DEPTH
    assert (await raw.close())[0] == 0


async def test_an_unusable_notification_is_dropped_without_an_answer(site: Site) -> None:
    raw = await started(site)
    await raw.send_line(
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\\udc00"}}'
    )
    listed = await raw.request("tools/list", {})
    assert listed["result"]["tools"]
    status, stderr = await raw.close()
    assert status == 0
    assert "dropped a notification" in stderr
    assert not any('"id":null' in line.replace(" ", "") for line in raw.stdout_lines)
