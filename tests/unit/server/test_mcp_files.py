"""Which files the tools may reach and quote (the server's FileScope and definitions.disclosure), through
the in-memory client: a confined (HTTP) server reaches only its project roots, no server reaches its
state directory, and no diagnostic quotes a file that is not a workflow source. The same attacks over a
real HTTP server are in tests/e2e/mcp/test_mcp_http_files.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult

from workflow_mcp.errors import InvalidInputError

from mcp_kit import HELLO, Env, call, connect, data, text

pytestmark = pytest.mark.anyio

SECRET = "TOPSECRET-7f3a-do-not-print"
PERSONAL = "export const meta = { name: 'mine', description: 'personal " + SECRET + "' }\nreturn 1\n"


def plant(env: Env) -> dict[str, Path]:
    """Files an attacker would like to read: outside the project, in the state directory (inside the
    project here), a link inside the project pointing outside, a personal workflow, a non-workflow file."""
    outside = env.root / "outside"
    outside.mkdir()
    secret = outside / "secret.js"
    secret.write_text(f"{SECRET}=1\nline two\n")
    state = env.project / ".state"
    state.mkdir()
    token = state / "http-token"
    token.write_text(f"alice={SECRET}\n")
    link = env.project / "link.js"
    link.symlink_to(secret)
    personal = env.home / ".claude" / "workflows" / "mine.js"
    personal.parent.mkdir(parents=True)
    personal.write_text(PERSONAL)
    dotenv = env.project / ".env"
    dotenv.write_text(f"API_KEY={SECRET}\n")
    env.workflow("hello", HELLO)
    return {
        "secret": secret,
        "state": state,
        "token": token,
        "link": link,
        "dotenv": dotenv,
        "outside": outside,
    }


def leaked(result: CallToolResult | Any) -> bool:
    return SECRET in json.dumps(result.model_dump(mode="json"), ensure_ascii=False)


async def refused(c: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The invalid-params message of a call the file scope refuses (it must not quote the secret)."""
    with pytest.raises(MCPError) as caught:
        await c.call_tool(tool, arguments)
    assert caught.value.error.code == INVALID_PARAMS, caught.value.error.message
    assert SECRET not in caught.value.error.message
    return caught.value.error.message


def attacks(files: dict[str, Path]) -> list[dict[str, Any]]:
    """Arguments that reach a file outside the roots or in the state directory."""
    return [
        {"path": str(files["secret"])},
        {"path": "../outside/secret.js"},
        {"path": "~/../outside/secret.js"},
        {"path": "link.js"},
        {"path": str(files["token"])},
        {"path": ".state/http-token"},
        {"path": "http-token", "cwd": ".state"},
        {"path": "secret.js", "cwd": str(files["outside"])},
        {"path": "/etc/passwd"},
    ]


@pytest.mark.parametrize("tool", ["workflow_validate", "workflow_describe", "workflow_run"])
async def test_a_confined_server_refuses_every_path_outside_its_roots_or_in_its_state_directory(
    env: Env, tool: str
) -> None:
    files = plant(env)
    server = env.server(confined=True, state=files["state"])
    async with connect(server) as c:
        for arguments in attacks(files):
            extra = {"provider": "fake"} if tool == "workflow_run" else {}
            message = await refused(c, tool, {**arguments, **extra})
            if "cwd" in arguments and arguments["cwd"] == ".state":
                assert message.startswith("cwd: ") and "[state-dir]" in message, message
            elif "state" in str(arguments) or "http-token" in str(arguments):
                assert "[state-dir]" in message and str(files["state"]) in message, message
            else:
                assert "[outside-roots]" in message and str(env.project) in message, message
                assert "--trust DIR" in message
    assert env.service.list_runs() == []


async def test_refusals_name_the_rule_and_the_roots_and_never_say_whether_the_file_exists(env: Env) -> None:
    files = plant(env)
    async with connect(env.server(confined=True, state=files["state"])) as c:
        there = await refused(c, "workflow_validate", {"path": str(files["secret"])})
        absent = await refused(c, "workflow_validate", {"path": str(files["outside"] / "absent.js")})
    assert there.replace("secret.js", "X") == absent.replace("absent.js", "X")


async def test_a_confined_server_lists_and_resolves_only_workflows_inside_its_roots(env: Env) -> None:
    plant(env)
    async with connect(env.server(confined=True)) as c:
        listed = data(await call(c, "workflow_list", {}))
        missing = await call(c, "workflow_validate", {"name": "mine"})
        described = await call(c, "workflow_describe", {"name": "mine"})
        with pytest.raises(MCPError) as resource:
            await c.read_resource("workflow://definitions/mine")
        hello = await c.read_resource("workflow://definitions/hello")
        outside_cwd = await refused(c, "workflow_list", {"cwd": str(env.home)})
    assert [w["name"] for w in listed["workflows"]] == ["hello"]
    assert all(str(env.home) not in d["path"] for d in listed["diagnostics"])
    for result in (missing, described):
        assert result.is_error and "[outside-roots]" in text(result) and not leaked(result)
    assert SECRET not in resource.value.error.message
    assert "agent('hello '" in hello.contents[0].text  # type: ignore[union-attr]
    assert "[outside-roots]" in outside_cwd


async def test_a_stdio_server_reaches_any_path_but_its_state_directory(env: Env) -> None:
    files = plant(env)
    async with connect(env.server(state=files["state"])) as c:
        personal = data(await call(c, "workflow_validate", {"name": "mine"}))
        outside = data(await call(c, "workflow_validate", {"path": str(files["secret"])}))
        for arguments in ({"path": str(files["token"])}, {"path": "http-token", "cwd": ".state"}):
            assert "[state-dir]" in await refused(c, "workflow_validate", arguments)
    assert personal["valid"] is True and personal["meta"]["name"] == "mine"
    assert outside["valid"] is False and SECRET not in json.dumps(outside)


@pytest.mark.parametrize("confined", [True, False])
async def test_diagnostics_never_quote_a_file_that_is_not_a_workflow_source(env: Env, confined: bool) -> None:
    files = plant(env)
    bad = env.workflow("notes", f"const password = '{SECRET}'\n")  # in .claude/workflows, not a workflow
    async with connect(env.server(confined=confined, state=files["state"])) as c:
        validated = await call(c, "workflow_validate", {"path": ".env"})
        described = await call(c, "workflow_describe", {"path": ".env"})
        ran = await call(c, "workflow_run", {"path": str(bad), "provider": "fake"})
        listed = await call(c, "workflow_list", {})
    report = data(validated)
    assert report["valid"] is False and report["sourceHash"] is None and report["warnings"] == []
    (error,) = report["errors"]
    assert error["rule"] == "syntax" and error["line"] == 1  # `API_KEY=TOPSECRET-…` does not parse
    assert "not a workflow source" in error["message"]
    assert described.is_error and "not a workflow source" in text(described)
    assert ran.is_error and "[meta-first-statement]" in text(ran)
    (notes,) = [d for d in data(listed)["diagnostics"] if d["path"] == str(bad)]
    assert "not a workflow source" in notes["message"] and notes["message"].endswith("[meta-first-statement]")
    assert SECRET not in json.dumps(data(listed)["diagnostics"])
    for result in (validated, described, ran):
        assert not leaked(result)


async def test_diagnostics_of_a_workflow_source_still_quote_it(env: Env) -> None:
    path = env.workflow("typo", "export const meta = { name: 'typo', description: foo() }\nreturn 1\n")
    async with connect(env.server(confined=True)) as c:
        report = data(await call(c, "workflow_validate", {"path": str(path)}))
        listed = data(await call(c, "workflow_list", {}))
    (error,) = report["errors"]
    assert error["rule"] == "meta-pure-literal" and "foo()" in error["message"]
    assert report["sourceHash"] is not None
    (diagnostic,) = listed["diagnostics"]
    assert "foo()" in diagnostic["message"]


async def test_a_link_inside_a_root_to_a_file_inside_a_root_is_followed(env: Env) -> None:
    target = env.workflow("hello", HELLO)
    (env.project / "alias.js").symlink_to(target)
    async with connect(env.server(confined=True)) as c:
        out = data(await call(c, "workflow_validate", {"path": "alias.js"}))
    assert out["valid"] is True and out["meta"]["name"] == "hello"


async def test_the_state_directory_is_unreachable_even_as_a_listing_cwd(env: Env) -> None:
    files = plant(env)
    flows = files["state"] / ".claude" / "workflows"
    flows.mkdir(parents=True)
    (flows / "hidden.js").write_text(HELLO.replace("'hello'", "'hidden'"))
    async with connect(env.server(state=files["state"])) as c:
        message = await refused(c, "workflow_list", {"cwd": str(files["state"])})
    assert "[state-dir]" in message and os.fspath(files["state"]) in message


def test_a_server_whose_state_directory_holds_its_project_refuses_to_start(env: Env) -> None:
    with pytest.raises(InvalidInputError) as caught:
        env.server(state=env.root)  # the project lies inside the state directory
    message = str(caught.value)
    assert str(env.root) in message and str(env.project) in message
    assert "set WORKFLOW_MCP_HOME to a directory of its own" in message


@pytest.mark.parametrize("arguments", [{"path": "hello\x00.js"}, {"name": "hello", "cwd": ".\x00"}])
async def test_a_path_holding_a_nul_character_is_invalid_params_naming_the_rule(
    env: Env, arguments: dict[str, Any]
) -> None:
    async with connect(env.server(confined=True)) as c:
        message = await refused(c, "workflow_validate", arguments)
    assert "holds a NUL character" in message and "[malformed-path]" in message
