"""Several ACP agents in one run, each a named provider or a preset: the phases of one workflow
routed to three different agent processes, each call on the provider its rule names (the
``provider`` of its ``agent.started`` event).

Two are the scripted stub agent (``acp_stub_agent.py``) under two names, each with its own prompt
log; the third is a real agent CLI, ``qwen`` (``@qwen-code/qwen-code``, the ``qwen`` preset: ``qwen
--acp``), pointed at the loopback mock Responses API. It is looked for in ``$WORKFLOW_MCP_TEST_QWEN``,
then the tests' npm cache (``.ci/run`` installs it there), then ``PATH``; the test that needs it
skips, saying how to install it, when it is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_gemini import MockGemini
from mocks.mock_responses import MockResponses
from workflow_mcp.providers.config import parse_config
from workflow_mcp.providers.routing import build_router

from acp_kit import SDK_SKIP_REASON, STUB_AGENT, npm_prefix

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
QWEN_PACKAGE = "@qwen-code/qwen-code@0.24.4"
QWEN_MISSING = (
    f"qwen-code is not installed: npm install --prefix {npm_prefix()} --no-audit --no-fund {QWEN_PACKAGE} "
    "(.ci/run does), or set WORKFLOW_MCP_TEST_QWEN to a qwen binary"
)
WORKFLOW = """export const meta = { name: 'three-agents', description: 'one phase per ACP agent' }
phase('Plan')
const plan = await agent('plan ECHO:plan', { label: 'plan' })
phase('Build')
const built = await agent('build ECHO:build', { label: 'build' })
phase('Review')
const review = await agent('review ECHO:review', { label: 'review' })
return { plan, built, review }
"""


def qwen_binary() -> str | None:
    explicit = os.environ.get("WORKFLOW_MCP_TEST_QWEN")
    if explicit:
        return explicit
    cached = npm_prefix() / "node_modules" / ".bin" / "qwen"
    return str(cached) if cached.exists() else shutil.which("qwen")


def stub_table(name: str, log: Path) -> str:
    return (
        f'[providers.{name}]\nuse = "acp"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(STUB_AGENT)}]\nset_env = {{ STUB_LOG = {json.dumps(str(log))} }}\n"
    )


def config(tmp_path: Path, review: str, extra: str = "") -> str:
    return (
        'default = "planner"\n'
        '[[rules]]\nphase = "Build"\nprovider = "builder"\n'
        f'[[rules]]\nphase = "Review"\nprovider = "{review}"\n'
        + stub_table("planner", tmp_path / "planner.log")
        + stub_table("builder", tmp_path / "builder.log")
        + extra
    )


ONE_CALL = """export const meta = { name: 'one-agent', description: 'one call' }
phase('Review')
return await agent('review ECHO:review', { label: 'review' })
"""


def run_cli(
    tmp_path: Path, toml: str, env: dict[str, str], workflow: str = WORKFLOW
) -> tuple[Any, list[dict[str, Any]]]:
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "config.toml").write_text(toml)
    (tmp_path / "wf.js").write_text(workflow)
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
        "WORKFLOW_MCP_HOME": str(tmp_path / "state"),
        "HOME": str(tmp_path / "home"),
        **env,
    }
    done = subprocess.run(
        [CLI, "run", "wf.js", "--events", "jsonl"],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return json.loads(done.stdout), events


def started(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["payload"]["label"], e["payload"]["provider"]) for e in events if e["type"] == "agent.started"]


def test_three_phases_run_on_three_named_acp_agents(tmp_path: Path) -> None:
    pytest.importorskip("acp", reason=SDK_SKIP_REASON)
    from helpers import arun, finish, start

    conf = parse_config(
        tomllib.loads(config(tmp_path, "reviewer", stub_table("reviewer", tmp_path / "reviewer.log"))),
        str(tmp_path / "config.toml"),
    )

    async def go() -> Any:
        router = build_router(config=conf)
        try:
            return await finish(start(WORKFLOW.split("\n", 1)[1], provider=router, cwd=str(tmp_path)))
        finally:
            await router.aclose()

    outcome = arun(go())
    assert outcome.status == "completed", outcome.error
    assert outcome.result == {
        "plan": "plan ECHO:plan",
        "built": "build ECHO:build",
        "review": "review ECHO:review",
    }
    events = [{"type": e.type, "payload": e.payload} for e in outcome.events]
    assert started(events) == [("plan", "planner"), ("build", "builder"), ("review", "reviewer")]
    # Three processes, each with its own settings: each agent saw only its own phase's prompt.
    for name, prompt in (("planner", "plan"), ("builder", "build"), ("reviewer", "review")):
        assert (tmp_path / f"{name}.log").read_text() == f"{prompt} ECHO:{prompt}\n"


def test_two_stub_agents_and_the_real_qwen_cli_each_take_the_phase_their_rule_names(tmp_path: Path) -> None:
    pytest.importorskip("acp", reason=SDK_SKIP_REASON)
    qwen = qwen_binary()
    if qwen is None:
        pytest.skip(QWEN_MISSING)
    # The preset: no `use` and no command; the table only adds settings (its own home and the
    # auth type that speaks the Responses API the mock serves). qwen is found on PATH.
    extra = (
        '[providers.qwen]\nargs = ["--acp", "--auth-type", "openai-responses"]\n'
        f'set_env = {{ HOME = {json.dumps(str(tmp_path / "qwen-home"))}, QWEN_CODE_NO_RELAUNCH = "true" }}\n'
    )
    (tmp_path / "qwen-home").mkdir()  # qwen refuses to start in a home that does not exist
    with MockResponses() as mock:
        env = {
            "PATH": os.pathsep.join((os.path.dirname(qwen), os.environ.get("PATH", ""))),
            "OPENAI_API_KEY": "mock-key",
            "OPENAI_BASE_URL": mock.base_url,
            "OPENAI_MODEL": "mock-model",
        }
        result, events = run_cli(tmp_path, config(tmp_path, "qwen", extra), env)
        prompts = [r.prompt for r in mock.received]
    assert result == {"plan": "plan ECHO:plan", "built": "build ECHO:build", "review": "review-done"}
    assert started(events) == [("plan", "planner"), ("build", "builder"), ("review", "qwen")]
    assert any("review ECHO:review" in p for p in prompts)
    assert not any("ECHO:plan" in p or "ECHO:build" in p for p in prompts)
    assert not (tmp_path / "reviewer.log").exists()


def test_the_opencode_preset_answers_through_the_mock_when_opencode_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("acp", reason=SDK_SKIP_REASON)
    opencode = os.environ.get("WORKFLOW_MCP_TEST_OPENCODE") or shutil.which("opencode")
    if opencode is None:
        pytest.skip(
            "opencode is not installed (npm install -g opencode-ai, 354 MB, so CI does not), or set "
            "WORKFLOW_MCP_TEST_OPENCODE to an opencode binary"
        )
    home = tmp_path / "opencode-home"
    (home / ".config" / "opencode").mkdir(parents=True)
    with MockResponses() as mock:
        # opencode's own configuration: its built-in openai provider, pointed at the mock.
        (home / ".config" / "opencode" / "opencode.json").write_text(
            json.dumps(
                {
                    "autoupdate": False,
                    "share": "disabled",
                    "enabled_providers": ["openai"],
                    "provider": {
                        "openai": {
                            "options": {"baseURL": mock.base_url, "apiKey": "mock-key"},
                            "models": {"mock-model": {"name": "mock"}},
                        }
                    },
                    "model": "openai/mock-model",
                }
            )
        )
        toml = (
            f'default = "opencode"\n[providers.opencode]\ncommand = {json.dumps(opencode)}\n'
            f'set_env = {{ HOME = {json.dumps(str(home))}, OPENCODE_DISABLE_MODELS_FETCH = "true" }}\n'
        )
        env = {"PATH": os.pathsep.join((os.path.dirname(opencode), os.environ.get("PATH", "")))}
        result, events = run_cli(tmp_path, toml, env, ONE_CALL)
        prompts = mock.prompts()
    assert result == "review-done"
    assert started(events) == [("review", "opencode")]
    assert any("review ECHO:review" in p for p in prompts)
    (usage,) = [e["payload"]["tokenUsage"] for e in events if e["type"] == "agent.completed"]
    assert usage["output"] > 0  # opencode reports each turn's usage over ACP


def test_the_gemini_preset_answers_through_the_gemini_api_mock_when_gemini_is_installed(
    tmp_path: Path,
) -> None:
    pytest.importorskip("acp", reason=SDK_SKIP_REASON)
    gemini = os.environ.get("WORKFLOW_MCP_TEST_GEMINI") or shutil.which("gemini")
    cached = npm_prefix() / "node_modules" / ".bin" / "gemini"
    gemini = gemini or (str(cached) if cached.exists() else None)
    if gemini is None:
        pytest.skip(
            f"the Gemini CLI is not installed: npm install --prefix {npm_prefix()} @google/gemini-cli, "
            "or set WORKFLOW_MCP_TEST_GEMINI to a gemini binary"
        )
    (tmp_path / "gemini-home").mkdir()
    # The preset as it is (gemini --experimental-acp): no table but its own home; the API key and
    # the endpoint are the agent's credential variables, passed from the environment.
    toml = (
        'default = "gemini"\n[providers.gemini]\n'
        f'set_env = {{ HOME = {json.dumps(str(tmp_path / "gemini-home"))}, GEMINI_CLI_NO_RELAUNCH = "true" }}\n'
    )
    with MockGemini() as mock:
        env = {
            "PATH": os.pathsep.join((os.path.dirname(gemini), os.environ.get("PATH", ""))),
            "GEMINI_API_KEY": "mock-key",
            "GOOGLE_GEMINI_BASE_URL": mock.base_url,
        }
        result, events = run_cli(tmp_path, toml, env, ONE_CALL)
        turns = [r for r in mock.received if r.stream]
    assert result == "review-done"
    assert started(events) == [("review", "gemini")]
    assert turns and "review ECHO:review" in turns[-1].prompt and turns[-1].api_key == "mock-key"
