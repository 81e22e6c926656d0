"""The shipped plugin, installed into the real programs: this repository as a Claude Code marketplace
(``.claude-plugin/marketplace.json``) and a Codex one (``.agents/plugins/marketplace.json``), both
listing ``plugins/workflow-mcp`` (``.mcp.json``: ``workflow-mcp serve``).

Each test installs it with the program's own commands into an isolated home (``HOME``,
``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` under ``tmp_path``), with ``workflow-mcp`` on ``PATH`` (a
shim running the code under test), then checks the program's MCP list and the tools it offers the
model on the first request of a headless turn, answered by a loopback mock model that then calls
``workflow_list`` through the program (whose answer names the project's workflow). The tool names
must be exactly the ones the server lists to a real MCP client (``mcp`` SDK, stdio).

Measured (Claude Code 2.1.332, Codex CLI 0.163.0; ``docs/PROFILE.md``, "Plugins"): both start the
server in the background, so a first request can go out without its tools (every run measured).
Claude: ``MCP_CONNECTION_NONBLOCKING=0`` makes ``claude -p`` wait, but only for a bounded few seconds
(``MCP_TIMEOUT`` does not extend it), which a slow start on a loaded machine can miss; so the test
holds a session through the Agent SDK and asks for ``mcp_reconnect`` (``reconnect_mcp_server``), which
answers once the server is connected, before the first prompt (``ENABLE_TOOL_SEARCH=false`` sends MCP
tools in the request's ``tools`` instead of deferring them to tool search). Codex: ``-c
mcp_optional_startup_grace_ms=0`` makes ``codex exec`` wait up to the server's startup timeout.

The programs are the ones the extras bundle (``claude-agent-sdk``'s Claude Code CLI, ``openai-codex``'s
codex); a test skips, saying which extra to install, when its program is absent. Every command has a
time limit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import workflow_mcp
from mocks.mock_messages import MockMessages, Received, Reply
from mocks.mock_responses import MockResponses
from mocks.mock_responses import Received as ResponsesReceived
from mocks.mock_responses import Reply as ResponsesReply

REPO = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 120
"""Each command of the programs (install, MCP list, one headless turn) must end within this."""
WORKFLOW = "plugin-install-check"
CLAUDE_SERVER = "plugin:workflow-mcp:workflow-mcp"
CLAUDE_TOOL_PREFIX = "mcp__plugin_workflow-mcp_workflow-mcp__"
CODEX_NAMESPACE = "mcp__workflow_mcp"


def claude_binary() -> Path | None:
    """The Claude Code CLI ``claude-agent-sdk`` bundles, or ``None`` without the ``claude`` extra."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "_bundled" / "claude"
    return path if path.is_file() else None


def codex_binary() -> Path | None:
    """The codex CLI ``openai-codex`` bundles, or ``None`` without the ``codex`` extra."""
    try:
        from codex_cli_bin import bundled_codex_path
    except ImportError:
        return None
    try:
        path: Path = bundled_codex_path()
    except FileNotFoundError:
        return None
    return path


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    """A ``bin`` folder whose ``workflow-mcp`` runs this interpreter on the code under test. Codex
    starts MCP servers with a minimal environment, so the shim sets ``PYTHONPATH`` itself."""
    folder = tmp_path / "bin"
    folder.mkdir()
    src = Path(workflow_mcp.__file__).resolve().parents[1]
    script = folder / "workflow-mcp"
    script.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH='{src}' exec '{sys.executable}' -c "
        "'import sys; from workflow_mcp.cli import main; sys.exit(main())' \"$@\"\n"
    )
    script.chmod(0o755)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project holding one workflow, so a ``workflow_list`` answer shows it."""
    proj = tmp_path / "proj"
    (proj / ".claude" / "workflows").mkdir(parents=True)
    (proj / ".claude" / "workflows" / "check.js").write_text(
        f"export const meta = {{ name: '{WORKFLOW}', description: 'seen through the plugin' }}\nreturn 1\n"
    )
    return proj


def server_tools(shim: Path, project: Path) -> set[str]:
    """The tool names ``workflow-mcp serve`` (through the shim) lists to a real MCP client."""

    async def listing() -> set[str]:
        params = StdioServerParameters(
            command=str(shim / "workflow-mcp"), args=["serve"], cwd=str(project), env=dict(os.environ)
        )  # the whole environment: the SDK's default one would drop WORKFLOW_MCP_HOME
        with anyio.fail_after(STEP_TIMEOUT_S):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return {t.name for t in (await session.list_tools()).tools}

    return anyio.run(listing)


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{' '.join(argv[1:])} exited {done.returncode}: {done.stdout}{done.stderr}"
    return done


def isolated_environment(tmp_path: Path, shim: Path, prefixes: tuple[str, ...]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{shim}{os.pathsep}{env.get('PATH', '')}")
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def test_claude_code_installs_the_plugin_and_offers_and_calls_the_servers_tools(
    tmp_path: Path, shim: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = claude_binary()
    if claude is None:
        pytest.skip(
            "Claude Code is not installed: the claude extra bundles it (pip install -e '.[test,claude]')"
        )
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    expected = server_tools(shim, project)
    assert {"workflow_list", "workflow_run", "workflow_run_status"} <= expected
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE_")):  # the SDK passes os.environ on
            monkeypatch.delenv(name)
    env = isolated_environment(tmp_path, shim, ("ANTHROPIC_", "CLAUDE_"))
    with MockMessages() as mock:

        def list_then_finish(rec: Received) -> Reply:
            if rec.after_tool_result:
                return Reply(text="listed")
            return Reply(tool=(CLAUDE_TOOL_PREFIX + "workflow_list", {}))

        mock.on("LIST-WORKFLOWS", list_then_finish)
        env.update(
            CLAUDE_CONFIG_DIR=str(tmp_path / "home" / ".claude"),
            # Every command gets the loopback mock: without a reachable API the plugin commands
            # waited about 17 s each (measured), offline.
            ANTHROPIC_BASE_URL=mock.base_url,
            ANTHROPIC_API_KEY="dummy",
            CLAUDE_CODE_MAX_RETRIES="0",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            DISABLE_ERROR_REPORTING="1",
            ENABLE_TOOL_SEARCH="false",
        )
        added = run([str(claude), "plugin", "marketplace", "add", str(REPO)], project, env)
        assert "Successfully added marketplace: workflow-mcp" in added.stdout + added.stderr
        installed = run([str(claude), "plugin", "install", "workflow-mcp@workflow-mcp"], project, env)
        assert (
            "Successfully installed plugin: workflow-mcp@workflow-mcp" in installed.stdout + installed.stderr
        )
        listed = run([str(claude), "mcp", "list"], project, env)
        assert f"{CLAUDE_SERVER}: workflow-mcp serve - ✔ Connected" in listed.stdout

        options = ClaudeAgentOptions(
            cli_path=str(claude),
            cwd=str(project),
            env=env,
            setting_sources=["user", "project", "local"],  # the plugin is enabled in the user settings
            allowed_tools=[CLAUDE_TOOL_PREFIX + "workflow_list"],
        )

        async def session() -> tuple[dict[str, Any], list[Any]]:
            with anyio.fail_after(STEP_TIMEOUT_S):
                async with ClaudeSDKClient(options) as client:
                    # The server starts in the background; `mcp_reconnect` answers once it is connected.
                    await client.reconnect_mcp_server(CLAUDE_SERVER)
                    status = dict(await client.get_mcp_status())
                    await client.query("LIST-WORKFLOWS")
                    messages = [m async for m in client.receive_response()]
            return status, messages

        status, messages = anyio.run(session)
    (server,) = [s for s in status["mcpServers"] if s["name"] == CLAUDE_SERVER]
    assert (server["status"], server["source"]) == ("connected", "plugin")
    assert {t["name"] for t in server["tools"]} == expected
    first = mock.received[0]
    offered = {t[len(CLAUDE_TOOL_PREFIX) :] for t in first.tools if t.startswith(CLAUDE_TOOL_PREFIX)}
    assert offered == expected
    (answered,) = [r for r in mock.received if r.after_tool_result]
    results = [
        block
        for block in answered.body["messages"][-1]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert len(results) == 1 and not results[0].get("is_error"), results
    assert WORKFLOW in json.dumps(results[0])
    final = messages[-1]
    assert isinstance(final, ResultMessage) and final.result == "listed", final


def test_codex_installs_the_plugin_and_offers_and_calls_the_servers_tools(
    tmp_path: Path, shim: Path, project: Path
) -> None:
    codex = codex_binary()
    if codex is None:
        pytest.skip(
            "the codex CLI is not installed: the codex extra bundles it (pip install -e '.[test,codex]')"
        )
    help_text = subprocess.run(
        [str(codex), "--help"], capture_output=True, text=True, timeout=STEP_TIMEOUT_S
    ).stdout
    if "plugin" not in help_text:
        pytest.skip(f"this codex ({codex}) has no `codex plugin` commands")
    expected = server_tools(shim, project)
    env = isolated_environment(tmp_path, shim, ("OPENAI_", "CODEX_"))
    codex_home = tmp_path / "home" / ".codex"
    with MockResponses() as mock:

        def list_then_finish(rec: ResponsesReceived) -> ResponsesReply:
            if rec.function_outputs:
                return ResponsesReply(text="listed")
            return ResponsesReply(function_call=("workflow_list", {}, CODEX_NAMESPACE))

        mock.on("LIST-WORKFLOWS", list_then_finish)
        mock.codex_config(codex_home)
        env.update(CODEX_HOME=str(codex_home), MOCK_API_KEY="dummy")
        added = run([str(codex), "plugin", "marketplace", "add", str(REPO)], project, env)
        assert "Added marketplace `workflow-mcp`" in added.stdout + added.stderr
        installed = run([str(codex), "plugin", "add", "workflow-mcp@workflow-mcp"], project, env)
        assert "Added plugin `workflow-mcp`" in installed.stdout + installed.stderr
        plugins = run([str(codex), "plugin", "list"], project, env)
        assert any(
            line.split()[:3] == ["workflow-mcp@workflow-mcp", "installed,", "enabled"]
            for line in plugins.stdout.splitlines()
        ), plugins.stdout
        servers = run([str(codex), "mcp", "list"], project, env)
        assert any(
            line.split()[:3] == ["workflow-mcp", "workflow-mcp", "serve"] and "enabled" in line.split()
            for line in servers.stdout.splitlines()
        ), servers.stdout
        turn = run(
            [
                str(codex),
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-c",
                "mcp_optional_startup_grace_ms=0",
                "LIST-WORKFLOWS",
            ],
            project,
            env,
        )
    items = [
        json.loads(line)["item"]
        for line in turn.stdout.splitlines()
        if line.startswith("{") and json.loads(line).get("type") == "item.completed"
    ]
    (tool_call,) = [i for i in items if i.get("type") == "mcp_tool_call"]
    assert (tool_call["server"], tool_call["tool"], tool_call["status"]) == (
        "workflow-mcp",
        "workflow_list",
        "completed",
    )
    assert WORKFLOW in json.dumps(tool_call["result"])
    assert (items[-1]["type"], items[-1]["text"]) == ("agent_message", "listed")
    (answered,) = [r for r in mock.received if r.function_outputs]
    assert WORKFLOW in json.dumps(answered.function_outputs)
    first = mock.received[0]
    namespaces: list[dict[str, Any]] = [
        t
        for t in first.body.get("tools", [])
        if t.get("type") == "namespace" and t.get("name") == CODEX_NAMESPACE
    ]
    assert len(namespaces) == 1, [t.get("name") for t in first.body.get("tools", [])]
    assert {t.get("name") for t in namespaces[0].get("tools", [])} == expected
