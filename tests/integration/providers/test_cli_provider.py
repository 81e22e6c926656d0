"""The generic ``cli`` provider beyond the shared contract (``tests/contract``): its settings, how
the prompt and the answer travel, format re-asks, failures told by exit status and words, the
output and time limits, and that no process it started outlives a call (real processes: small
Python programs written by each test)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workflow_mcp.providers.base import (
    AgentExecutionError,
    AgentRequest,
    CancelSignal,
    ProviderAuthError,
    ProviderEvent,
    ProviderUsageLimitError,
)
from workflow_mcp.providers.cli import CLIProvider
from workflow_mcp.providers.config import ProviderConfigError, parse_config
from workflow_mcp.providers.policy import DEFAULT_POLICY
from workflow_mcp.providers.registry import ProviderStartError

from helpers import arun, call_provider, pid_alive

pytestmark = pytest.mark.timeout(60)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def program(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    path = tmp_path / name
    path.write_text("import json, os, subprocess, sys, time\n" + body, encoding="utf-8")
    return str(path)


def provider(command: list[str], **settings: Any) -> CLIProvider:
    return CLIProvider.create({"command": command, **settings}, policy=DEFAULT_POLICY, source="test.toml")


def ask(cli: CLIProvider, signal: CancelSignal | None = None, **request: Any) -> Any:
    async def scenario() -> Any:
        try:
            return await call_provider(cli, AgentRequest(**{"prompt": "hi", "label": "l", **request}), signal)
        finally:
            await cli.aclose()

    return arun(scenario())


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "key", "words"),
    [
        ({}, "providers.cli.command", "is required"),
        ({"command": []}, "providers.cli.command", "is required"),
        ({"command": ["agy", "{promt_file}"]}, "providers.cli.command", "unknown placeholder {promt_file}"),
        (
            {"command": ["agy"], "args": {"model": ["-m", "{schema_file}"]}},
            "providers.cli.args.model",
            "{model}",
        ),
        (
            {"command": ["agy"], "args": {"files": ["-f"]}},
            "providers.cli.args.files",
            "unknown argument group",
        ),
        ({"command": ["agy"], "output": "xml"}, "providers.cli.output", "one of text, json, jsonl"),
        ({"command": ["agy"], "exit_codes": {"2": "sad"}}, "providers.cli.exit_codes.2", "one of auth"),
        ({"command": ["agy"], "exit_codes": {"two": "auth"}}, "providers.cli.exit_codes.two", "exit status"),
        (
            {"command": ["agy"], "patterns": {"auth": "("}},
            "providers.cli.patterns.auth",
            "regular expression",
        ),
        ({"command": ["agy"], "patterns": {"sad": "x"}}, "providers.cli.patterns.sad", "expected one of"),
        ({"command": ["agy"], "usage": {"total": "u.t"}}, "providers.cli.usage.total", "expected input"),
        ({"command": ["agy"], "max_output_bytes": 0}, "providers.cli.max_output_bytes", "at least 1"),
        ({"command": ["agy"], "images": 1}, "providers.cli.images", "boolean"),
    ],
)
def test_bad_settings_are_refused_naming_the_file_and_the_key(
    settings: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        CLIProvider.create(settings, policy=DEFAULT_POLICY, source="test.toml")
    assert caught.value.key == key and caught.value.path == "test.toml"
    assert words in caught.value.problem


@pytest.mark.parametrize("key", ["command", "args", "set_env"])
def test_only_the_users_own_configuration_may_choose_the_program_or_its_arguments(key: str) -> None:
    value: Any = {"command": ["agy"], "args": {"model": ["-m", "{model}"]}, "set_env": {"A": "b"}}[key]
    with pytest.raises(ProviderConfigError) as caught:
        parse_config({"providers": {"cli": {key: value}}}, "repo/workflow-mcp.toml", narrow=True)
    assert caught.value.key == f"providers.cli.{key}"
    assert "only in the user configuration" in caught.value.problem


def test_the_probe_finds_the_program_or_says_what_to_configure(tmp_path: Path) -> None:
    missing = CLIProvider.probe({})
    assert not missing.available and "command" in (missing.problem or "")
    gone = CLIProvider.probe({"command": [str(tmp_path / "nothing")]})
    assert not gone.available and "not an executable file" in (gone.problem or "")
    found = CLIProvider.probe({"command": [sys.executable, "-c", "pass"]})
    assert found.available and found.location == sys.executable and found.version
    assert found.logged_in is None


def test_the_capabilities_are_the_ones_its_settings_declare() -> None:
    plain = provider(["agy"])
    assert (plain.capabilities.images, plain.capabilities.structured_output) == (False, True)
    seeing = provider(["agy"], images=True, args={"image": ["-i", "{image_file}"]}, structured_output=False)
    assert (seeing.capabilities.images, seeing.capabilities.structured_output) == (True, False)
    with pytest.raises(ProviderConfigError, match=r"providers\.cli\.images: needs args\.image"):
        provider(["agy"], images=True)


# -- prompt and answer -------------------------------------------------------------------------


def test_the_prompt_goes_to_standard_input_unless_the_command_names_it(tmp_path: Path) -> None:
    echo = program(tmp_path, "print('stdin=' + sys.stdin.read() + ' argv=' + '|'.join(sys.argv[1:]))")
    result, _ = ask(provider([sys.executable, echo, "--cwd={cwd}"]), prompt="hello", cwd=str(tmp_path))
    assert result.text == f"stdin=hello argv=--cwd={tmp_path}"
    result, _ = ask(provider([sys.executable, echo, "{prompt}"]), prompt="as an argument")
    assert result.text == "stdin= argv=as an argument"
    reader = program(tmp_path, "print(open(sys.argv[1]).read() + ':' + sys.stdin.read())", "reader.py")
    result, _ = ask(provider([sys.executable, reader, "{prompt_file}"]), prompt="from a file")
    assert result.text == "from a file:"


def test_argument_groups_are_added_only_when_the_call_has_the_value(tmp_path: Path) -> None:
    argv = program(tmp_path, "print(json.dumps(sys.argv[1:]))")
    cli = provider(
        [sys.executable, argv],
        args={
            "model": ["--model", "{model}"],
            "effort": ["--effort={effort}"],
            "schema": ["--schema", "{schema_file}"],
        },
        schema_in_prompt=False,
        output="json",
        answer_path="0",
    )
    with pytest.raises(
        AgentExecutionError, match=r"nothing at '0' \(providers.cli.answer_path\); it began: '\[\]"
    ):
        ask(cli)  # no argument at all was added: the answer path finds nothing
    cli = provider(
        [sys.executable, argv], args={"model": ["--model", "{model}"], "effort": ["-e", "{effort}"]}
    )
    result, _ = ask(cli, model="gpt-x", effort="high")
    assert json.loads(result.text) == ["--model", "gpt-x", "-e", "high"]
    schema_reader = program(tmp_path, "print(open(sys.argv[2]).read())", "schema.py")
    cli = provider(
        [sys.executable, schema_reader],
        args={"schema": ["--schema", "{schema_file}"]},
        schema_in_prompt=False,
    )
    result, _ = ask(cli, schema=SCHEMA)
    # The program printed the schema file: an object the schema itself does not accept as an answer
    # is still a JSON value, so it is the structured answer (the engine validates it).
    assert result.has_structured and result.structured == SCHEMA


def test_a_json_answer_is_read_at_its_paths_and_jsonl_takes_the_last_line_that_has_it(tmp_path: Path) -> None:
    lines = [
        {"type": "progress", "text": "thinking"},
        {"type": "result", "reply": {"text": "done"}, "tokens": {"in": 7, "out": 3}, "sid": "s-1"},
        {"type": "stats"},
    ]
    body = "".join(f"print({json.dumps(json.dumps(line))})\n" for line in lines)
    jsonl = program(tmp_path, body)
    cli = provider(
        [sys.executable, jsonl],
        output="jsonl",
        answer_path="reply.text",
        usage={"input": "tokens.in", "output": "tokens.out"},
        session_path="sid",
    )
    result, _ = ask(cli)
    assert (result.text, result.usage.input, result.usage.output, result.session) == ("done", 7, 3, "s-1")
    whole = program(tmp_path, "print(json.dumps({'value': {'n': 4}, 'result': 'prose'}))", "whole.py")
    cli = provider([sys.executable, whole], output="json", structured_path="value")
    result, _ = ask(cli, schema=SCHEMA)
    assert result.has_structured and result.structured == {"n": 4}
    not_json = program(tmp_path, "print('plain words')", "words.py")
    with pytest.raises(AgentExecutionError, match=r'output = "json".*plain words'):
        ask(provider([sys.executable, not_json], output="json"))


def test_a_reply_without_json_is_asked_again_with_the_reply_then_returned_as_text(tmp_path: Path) -> None:
    count = tmp_path / "count"
    flaky = program(
        tmp_path,
        f"p = {str(count)!r}\nn = int(open(p).read()) + 1 if os.path.exists(p) else 1\nopen(p, 'w').write(str(n))\n"
        "prompt = sys.stdin.read()\n"
        "print('{\"n\": 2}' if 'was not a JSON value' in prompt and 'Sure thing' in prompt else 'Sure thing')",
    )
    result, events = ask(provider([sys.executable, flaky]), schema=SCHEMA)
    assert result.has_structured and result.structured == {"n": 2}
    assert [e.data.get("reask") for e in events if e.data.get("reask")] == [1]
    stubborn = program(tmp_path, "sys.stdin.read(); print('never json')", "stubborn.py")
    result, _ = ask(provider([sys.executable, stubborn], json_retries=0), schema=SCHEMA)
    assert not result.has_structured and result.text == "never json"
    assert "not a JSON value" in (result.message or "")


# -- failures ----------------------------------------------------------------------------------


def test_failures_are_told_by_exit_status_then_by_the_programs_words(tmp_path: Path) -> None:
    def failing(words: str, status: int) -> str:
        return program(tmp_path, f"sys.stderr.write({words!r}); sys.exit({status})", f"fail{status}.py")

    with pytest.raises(ProviderAuthError) as auth:
        ask(
            provider([sys.executable, failing("Error: not logged in", 1)], name="agy", login_hint="agy login")
        )
    assert auth.value.backend == "agy" and "agy login" in str(auth.value)
    with pytest.raises(ProviderUsageLimitError):
        ask(provider([sys.executable, failing("plan exhausted", 7)], exit_codes={"7": "usage_limit"}))
    result, _ = ask(provider([sys.executable, failing("upstream 503 overloaded", 2)]))
    assert (result.outcome, result.failure) == ("provider_failed", "overloaded")
    result, _ = ask(provider([sys.executable, failing("boom", 4)], patterns={"api": "boom"}))
    assert (result.outcome, result.failure) == ("provider_failed", None) and "boom" in (result.message or "")
    with pytest.raises(AgentExecutionError, match="exited with status 5: disk full"):
        ask(provider([sys.executable, failing("disk full", 5)]))


def test_a_program_that_cannot_start_is_a_start_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderStartError, match="cannot start"):
        ask(provider([str(tmp_path / "no-such-agent")]))


def test_output_past_its_limit_stops_the_program_and_rejects_naming_the_setting(tmp_path: Path) -> None:
    chatty = program(tmp_path, "sys.stdout.write('x' * 1_000_000); sys.stdout.flush(); time.sleep(60)")
    with pytest.raises(AgentExecutionError, match=r"limit of 1000 bytes \(providers.cli.max_output_bytes\)"):
        ask(provider([sys.executable, chatty], max_output_bytes=1000))


# -- no process outlives a call ----------------------------------------------------------------

SPAWNER = """
pids = sys.argv[1]
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])
open(pids, 'w').write(f'{os.getpid()} {child.pid}')
sys.stderr.write('ready\\n'); sys.stderr.flush()
"""


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


def test_cancelling_a_call_kills_the_program_and_the_grandchild_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = program(tmp_path, SPAWNER + "time.sleep(120)\n")
    cli = provider([sys.executable, agent, str(pids)], kill_grace_s=2.0)
    signal = CancelSignal()

    async def emit(event: ProviderEvent) -> None:
        if event.text == "ready":
            signal.cancel("the test cancels")

    async def scenario() -> None:
        from workflow_mcp.providers.base import AgentContext

        try:
            with pytest.raises(asyncio.CancelledError):
                await cli.execute(
                    AgentRequest(prompt="go", label="g"), AgentContext(signal=signal, emit=emit)
                )
        finally:
            await cli.aclose()

    arun(scenario())
    assert [pid_alive(pid) for pid in _pids(pids)] == [False, False]


def test_a_timeout_kills_the_whole_group_and_resolves_null_naming_the_setting(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = program(tmp_path, SPAWNER + "time.sleep(120)\n")
    result, _ = ask(provider([sys.executable, agent, str(pids)], timeout_s=1.0, kill_grace_s=2.0))
    assert result.outcome == "provider_failed"
    assert "no answer within 1 s (providers.cli.timeout_s)" in (result.message or "")
    assert [pid_alive(pid) for pid in _pids(pids)] == [False, False]


def test_a_program_that_answers_and_leaves_a_grandchild_holding_its_output_returns_at_once(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    agent = program(tmp_path, SPAWNER + "print('answer'); sys.stdout.flush()\n")
    cli = provider([sys.executable, agent, str(pids)], timeout_s=30.0, kill_grace_s=2.0)

    async def scenario() -> Any:
        try:
            async with asyncio.timeout(15):  # far below the 120 s the grandchild would hold the pipe
                return await call_provider(cli, AgentRequest(prompt="go", label="g"))
        finally:
            await cli.aclose()

    result, _ = arun(scenario())
    assert (result.outcome, result.text) == ("completed", "answer")
    assert [pid_alive(pid) for pid in _pids(pids)] == [False, False]


def test_a_json_document_can_report_the_failure_and_the_upstream_status_itself(tmp_path: Path) -> None:
    def reporting(document: dict[str, Any], status: int) -> CLIProvider:
        body = f"print(json.dumps({document!r})); sys.exit({status})"
        path = program(tmp_path, body, f"doc{status}{len(tmp_path.name)}{len(document)}.py")
        return provider(
            [sys.executable, path],
            output="json",
            error_path="is_error",
            status_path="api_error_status",
            name="agy",
        )

    with pytest.raises(ProviderAuthError, match="Invalid API key"):
        ask(reporting({"is_error": True, "result": "Invalid API key", "api_error_status": 401}, 0))
    busy = reporting({"is_error": True, "result": "API Error: busy", "api_error_status": 529, "n": 1}, 1)
    result, _ = ask(busy)
    assert (result.outcome, result.failure) == ("provider_failed", "overloaded")
    assert result.message == "agy: exited with status 1: API Error: busy"
    with pytest.raises(AgentExecutionError, match="reported a failure: API Error: 400 disk full"):
        ask(
            reporting(
                {
                    "is_error": True,
                    "result": "API Error: 400 disk full",
                    "api_error_status": 400,
                    "a": 1,
                    "b": 2,
                },
                0,
            )
        )


def test_the_cli_name_is_registered_like_every_provider_and_builds_this_provider(tmp_path: Path) -> None:
    import tomllib

    from workflow_mcp.providers.registry import (
        available,
        get_provider,
        register_provider,
        unregister_provider,
    )

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    entry_points = tomllib.loads(pyproject.read_text())["project"]["entry-points"]["workflow_mcp.providers"]
    assert entry_points["cli"] == "workflow_mcp.providers.cli:CLIProvider"
    register_provider("cli", CLIProvider)  # what the entry point names, in a stale development install
    try:
        unconfigured = available("cli", {})
        assert not unconfigured.availability.available
        assert "set [providers.cli] command" in (unconfigured.availability.problem or "")
        built = get_provider("cli", {"command": [sys.executable, "-c", "print('hi')"]}, source="config.toml")
        assert isinstance(built, CLIProvider)
        result, _ = ask(built)
        assert result.text == "hi"
    finally:
        unregister_provider("cli")


@pytest.mark.parametrize(
    ("provider_name", "key", "value"),
    [
        ("cli", "env", ["*SECRET*"]),  # extra names the program sees, past the policy's
        ("cli", "cwd", "/"),
        ("codex", "env", ["*"]),
        ("codex", "codex_home", "./.codex"),  # its config.toml names MCP servers and model providers
        ("codex", "config", {"sandbox_mode": "danger-full-access"}),
        ("claude", "config_dir", "./.claude-evil"),  # its settings.json holds hooks that run commands
        ("claude", "env", ["AWS_*"]),
        ("openai", "api_key_env", "AWS_SECRET_ACCESS_KEY"),  # sent as the bearer token
        ("acp", "mode", "bypassPermissions"),
        ("acp", "session_config", {"approval": "never"}),
        ("acp", "cwd", "/"),
    ],
)
def test_a_project_file_may_not_choose_a_providers_environment_configuration_or_permissions(
    provider_name: str, key: str, value: Any
) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        parse_config({"providers": {provider_name: {key: value}}}, "repo/workflow-mcp.toml", narrow=True)
    assert caught.value.key == f"providers.{provider_name}.{key}"
    assert "only in the user configuration" in caught.value.problem
    assert parse_config({"providers": {provider_name: {key: value}}}, "config.toml", narrow=False)


def test_a_repository_cannot_hand_the_users_program_a_secret_of_the_environment(tmp_path: Path) -> None:
    # The user's own program, which prints the environment it gets; the repository asks for more.
    home, project = tmp_path / "state", tmp_path / "repo"
    home.mkdir()
    project.mkdir()
    (home / "config.toml").write_text(
        f'[providers.cli]\ncommand = ["{sys.executable}", "-c", '
        '"import os, json; print(json.dumps(sorted(os.environ)))"]\n'
    )
    (project / "wf.js").write_text(
        "export const meta = { name: 'e', description: 'e' }\nreturn await agent('go')\n"
    )
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(home), "HOME": str(tmp_path), "MY_SECRET_TOKEN": "hunter2"}
    cli = [sys.executable, "-m", "workflow_mcp.cli", "run", "wf.js", "--provider", "cli", "--events", "none"]
    (project / "workflow-mcp.toml").write_text('[providers.cli]\nenv = ["*SECRET*"]\n')
    refused = subprocess.run(cli, cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert "providers.cli.env: chooses a provider, a program or its environment" in refused.stderr
    assert "hunter2" not in refused.stdout + refused.stderr
    (project / "workflow-mcp.toml").unlink()
    ran = subprocess.run(cli, cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "MY_SECRET_TOKEN" not in json.loads(json.loads(ran.stdout))
