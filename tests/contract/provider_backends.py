"""The provider contract suite's backends (the ``backend`` fixture is in ``conftest.py``): each provider driven through its real SDK or program
against a loopback model server (``tests/mocks/``), behind one small scripting surface
(:class:`Backend`), so one test states one claim for every provider.

- ``fake``: :class:`~workflow_mcp.FakeProvider`, scripted directly (it is its own model).
- ``codex``: the SDK's bundled ``codex app-server`` against the mock Responses API.
- ``claude``: the Claude Agent SDK's bundled Claude Code CLI against the mock Messages API.
- ``acp``: codex-acp (``@zed-industries/codex-acp``, installed by npm on first use) against the
  mock Responses API.
- ``openai``: the official ``openai`` SDK against the mock Chat Completions API.
- ``cli``: the generic command-line provider running ``tests/mocks/agent_cli.py`` (a small agent
  program that prints JSON) against the mock Chat Completions API.
- ``claude-cli``: the generic command-line provider running a real agent program, the Claude Code
  CLI the Claude Agent SDK bundles (``claude -p --output-format json --json-schema …``), against
  the mock Messages API.

A backend whose extra is not installed skips, saying which extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for folder in (_TESTS, _TESTS / "integration" / "providers"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from mocks.base import UNSET  # noqa: E402
from workflow_mcp.providers.base import AgentContext, AgentProvider, AgentRequest, AgentResult  # noqa: E402
from workflow_mcp.providers.fake import FakeProvider  # noqa: E402

PROVIDERS = ("fake", "codex", "claude", "acp", "openai", "cli", "claude-cli")
FAKE_TOKENS: Final = {"input": 10, "output": 5, "cacheRead": 1, "cacheWrite": 2}


class Backend(Protocol):
    """One provider and the model behind it, scripted by prompt (a regular expression)."""

    name: str
    """The provider's name."""
    backend: str
    """The name its errors and pauses give (an ACP agent's own name)."""
    cwd: str
    has_login: bool
    """Whether a login can be refused (the fake has none)."""

    @property
    def login_hint(self) -> str | None:
        """How its auth error says to log in."""
        ...

    secret: str
    """The credential the backend was given: never in a message."""

    def provider(self) -> AgentProvider:
        """A new provider reaching this backend (the caller closes it)."""
        ...

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        """Answer prompts matching ``pattern`` with ``text`` or the JSON value ``json``."""
        ...

    def fail(self, pattern: str) -> None:
        """Answer prompts matching ``pattern`` with a server failure (HTTP 500)."""
        ...

    def refuse(self, pattern: str, message: str) -> None:
        """Answer prompts matching ``pattern`` with a bad-request refusal (HTTP 400, ``message``)."""
        ...

    def refuse_login(self) -> None:
        """Refuse every request for want of a valid login (HTTP 401)."""
        ...

    def hold(self, pattern: str) -> None:
        """Keep prompts matching ``pattern`` unanswered until :meth:`release`."""
        ...

    async def in_flight(self, pattern: str, provider: AgentProvider) -> None:
        """Return once a held call matching ``pattern`` reached the model (bounded)."""
        ...

    def release(self) -> None: ...

    def usage(self) -> dict[str, int]:
        """The token usage (``TokenUsage.to_json()``) the model reports for one scripted answer."""
        ...


class _ObservedFake(FakeProvider):
    """The fake, telling when a call has arrived (:attr:`arrived`), as a model server's
    ``wait_for_prompt`` does."""

    def __init__(self, script: dict[str, Any]) -> None:
        super().__init__(script)
        self.arrived = asyncio.Event()

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        task = asyncio.ensure_future(super().execute(request, context))
        self.arrived.set()  # the call is recorded in `calls` by now
        return await task


class FakeBackend:
    name = backend = "fake"
    has_login = False
    login_hint = None
    secret = "no secret"

    def __init__(self, cwd: Path) -> None:
        self.cwd = str(cwd)
        self.rules: list[dict[str, Any]] = []

    def provider(self) -> AgentProvider:
        return _ObservedFake({"rules": self.rules, "default": {"synthesize": True, "tokens": FAKE_TOKENS}})

    def _rule(self, pattern: str, respond: dict[str, Any]) -> None:
        self.rules.append({"match": {"prompt": pattern}, "respond": {**respond, "tokens": FAKE_TOKENS}})

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        self._rule(pattern, {"text": text} if json is UNSET else {"result": json})

    def fail(self, pattern: str) -> None:
        self._rule(pattern, {"fail": "provider", "message": "HTTP 500: mock failure"})

    def refuse(self, pattern: str, message: str) -> None:
        self._rule(pattern, {"fail": "error", "message": message})

    def refuse_login(self) -> None:
        raise NotImplementedError("the fake provider has no login")

    def hold(self, pattern: str) -> None:
        self._rule(pattern, {"text": "late", "delayMs": 120_000})

    async def in_flight(self, pattern: str, provider: AgentProvider) -> None:
        assert isinstance(provider, _ObservedFake)
        regex = re.compile(pattern)
        async with asyncio.timeout(30):
            while not any(regex.search(call.prompt) for call in provider.calls):
                provider.arrived.clear()
                await provider.arrived.wait()

    def release(self) -> None:
        pass

    def usage(self) -> dict[str, int]:
        return dict(FAKE_TOKENS)


class MockBackend:
    """A provider in front of one of the loopback model servers."""

    def __init__(
        self,
        name: str,
        cwd: Path,
        mock: Any,
        reply: type,
        make: Any,
        *,
        backend: str | None = None,
        login_hint: str,
        secret: str,
        tokens: tuple[int, ...],
        usage: dict[str, int],
    ) -> None:
        self.name, self.backend, self.cwd, self.has_login = name, backend or name, str(cwd), True
        self.login_hint, self.secret = login_hint, secret
        self.mock, self._reply, self._make = mock, reply, make
        self._tokens, self._usage = tokens, usage

    def provider(self) -> AgentProvider:
        provider: AgentProvider = self._make()
        return provider

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        answer = {"text": text} if json is UNSET else {"json": json}
        self.mock.on(pattern, self._reply(**answer, tokens=self._tokens))

    def fail(self, pattern: str) -> None:
        self.mock.on(pattern, self._reply(status=500, message="mock failure"))

    def refuse(self, pattern: str, message: str) -> None:
        self.mock.on(pattern, self._reply(status=400, message=message))

    def refuse_login(self) -> None:
        self.mock.auth_error = True

    def hold(self, pattern: str) -> None:
        self.mock.on(pattern, self._reply(hold=True))

    async def in_flight(self, pattern: str, provider: AgentProvider) -> None:
        await asyncio.to_thread(self.mock.wait_for_prompt, pattern)

    def release(self) -> None:
        self.mock.release()

    def usage(self) -> dict[str, int]:
        return dict(self._usage)


@contextlib.contextmanager
def backend_for(name: str, tmp_path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    if name == "fake":
        yield FakeBackend(cwd)
    elif name == "codex":
        pytest.importorskip("openai_codex", reason="the codex extra is not installed")
        from mocks.mock_responses import MockResponses
        from mocks.mock_responses import Reply as ResponsesReply
        from workflow_mcp.providers.codex import CodexProvider
        from workflow_mcp.providers.policy import DEFAULT_POLICY

        monkeypatch.setenv("MOCK_API_KEY", "mock-key")
        with MockResponses() as mock:
            home = tmp_path / "codex-home"
            mock.codex_config(home)
            settings: dict[str, object] = {"codex_home": str(home), "env": ["MOCK_API_KEY"]}
            yield MockBackend(
                "codex",
                cwd,
                mock,
                ResponsesReply,
                lambda: CodexProvider.create(settings, policy=DEFAULT_POLICY, source="test"),
                login_hint="codex login",
                secret="mock-key",
                tokens=(10, 5),
                usage={"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
            )
    elif name == "claude":
        pytest.importorskip("claude_agent_sdk", reason="the claude extra is not installed")
        from mocks.mock_messages import Reply as MessagesReply

        from claude_kit import claude_setup

        with claude_setup(tmp_path, monkeypatch) as setup:
            yield MockBackend(
                "claude",
                setup.cwd,
                setup.mock,
                MessagesReply,
                setup.provider,
                login_hint="claude /login",
                secret="dummy",
                tokens=(10, 5, 3, 2),
                usage={"input": 10, "output": 5, "cacheRead": 3, "cacheWrite": 2},
            )
    elif name == "acp":
        from mocks.mock_responses import Reply as ResponsesReply

        from acp_kit import codex_acp_setup

        with codex_acp_setup(tmp_path, monkeypatch) as setup:
            # Measured: codex-acp 0.16 puts no ``usage`` in its prompt responses (per-turn usage is
            # unstable in ACP v1), so the call reports none; the stub agent's tests cover an agent
            # that reports it.
            yield MockBackend(
                "acp",
                setup.cwd,
                setup.mock,
                ResponsesReply,
                setup.provider,
                backend="codex-acp",
                login_hint="codex login",
                secret="mock-key",
                tokens=(10, 5),
                usage={"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            )
    elif name == "cli":
        from mocks.mock_chat import MockChat
        from mocks.mock_chat import Reply as ChatReply
        from workflow_mcp.providers.cli import CLIProvider
        from workflow_mcp.providers.policy import DEFAULT_POLICY

        monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
        with MockChat() as mock:
            cli_settings = cli_agent_settings(mock.base_url)
            yield MockBackend(
                "cli",
                cwd,
                mock,
                ChatReply,
                lambda: CLIProvider.create(cli_settings, policy=DEFAULT_POLICY, source="test"),
                backend="agent_cli",
                login_hint="agent_cli login",
                secret="sk-mock-key",
                tokens=(12, 4, 2),
                usage={"input": 10, "output": 4, "cacheRead": 2, "cacheWrite": 0},
            )
    elif name == "claude-cli":
        sdk = pytest.importorskip("claude_agent_sdk", reason="the claude extra is not installed")
        from mocks.mock_messages import Reply as MessagesReply
        from workflow_mcp.providers.cli import CLIProvider
        from workflow_mcp.providers.policy import DEFAULT_POLICY

        from claude_kit import claude_setup

        program = Path(sdk.__file__).parent / "_bundled" / "claude"
        with claude_setup(tmp_path, monkeypatch) as setup:
            claude_settings = claude_cli_settings(str(program), setup.settings["config_dir"])
            yield MockBackend(
                "cli",
                setup.cwd,
                setup.mock,
                MessagesReply,
                lambda: CLIProvider.create(claude_settings, policy=DEFAULT_POLICY, source="test"),
                backend="claude-cli",
                login_hint="claude /login",
                secret="dummy",
                tokens=(10, 5, 3, 2),
                usage={"input": 10, "output": 5, "cacheRead": 3, "cacheWrite": 2},
            )
    else:
        pytest.importorskip("openai", reason="the openai extra is not installed")
        from mocks.mock_chat import MockChat
        from mocks.mock_chat import Reply as ChatReply
        from workflow_mcp.providers.openai_compat import OpenAIProvider
        from workflow_mcp.providers.policy import DEFAULT_POLICY

        monkeypatch.setenv("MOCK_CHAT_KEY", "sk-mock-key")
        with MockChat() as mock:
            settings = {
                "model": "mock-model",
                "base_url": mock.base_url,
                "api_key_env": "MOCK_CHAT_KEY",
                "max_retries": 0,
            }
            yield MockBackend(
                "openai",
                cwd,
                mock,
                ChatReply,
                lambda: OpenAIProvider.create(settings, policy=DEFAULT_POLICY, source="test"),
                login_hint="set MOCK_CHAT_KEY",
                secret="sk-mock-key",
                tokens=(12, 4, 2),  # prompt 12 of which 2 cached, completion 4
                usage={"input": 10, "output": 4, "cacheRead": 2, "cacheWrite": 0},
            )


AGENT_CLI: Final = str(_TESTS / "mocks" / "agent_cli.py")


def cli_agent_settings(base_url: str, **more: Any) -> dict[str, Any]:
    """``[providers.cli]`` settings running ``tests/mocks/agent_cli.py`` against ``base_url``: the
    prompt as a file, its JSON output read at ``result`` with its usage, 401s as a login."""
    return {
        "command": [sys.executable, AGENT_CLI, "--base-url", base_url, "{prompt_file}"],
        "args": {"model": ["--model", "{model}"], "image": ["--image", "{image_file}"]},
        "output": "json",
        "answer_path": "result",
        "session_path": "session_id",
        "usage": {
            "input": "usage.input_tokens",
            "output": "usage.output_tokens",
            "cache_read": "usage.cache_read_input_tokens",
        },
        "env": ["MOCK_CHAT_KEY"],
        "name": "agent_cli",
        "login_hint": "agent_cli login",
        "kill_grace_s": 2.0,
        **more,
    }


def claude_cli_settings(program: str, config_dir: str) -> dict[str, Any]:
    """``[providers.cli]`` settings running the Claude Code CLI in print mode: the prompt on standard
    input, the JSON result document read at its paths, the schema through ``--json-schema``."""
    return {
        "command": [program, "-p", "--bare", "--no-session-persistence", "--output-format", "json"],
        "args": {"model": ["--model", "{model}"], "schema": ["--json-schema", "{schema}"]},
        "output": "json",
        "answer_path": "result",
        "structured_path": "structured_output",
        "session_path": "session_id",
        "error_path": "is_error",
        "status_path": "api_error_status",
        "usage": {
            "input": "usage.input_tokens",
            "output": "usage.output_tokens",
            "cache_read": "usage.cache_read_input_tokens",
            "cache_write": "usage.cache_creation_input_tokens",
        },
        "schema_in_prompt": False,
        "env": [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "CLAUDE_CODE_*",
            "DISABLE_AUTOUPDATER",
            "IS_SANDBOX",
        ],
        "set_env": {"CLAUDE_CONFIG_DIR": config_dir},
        "name": "claude-cli",
        "login_hint": "claude /login",
        "kill_grace_s": 2.0,
    }
