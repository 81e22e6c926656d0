"""The provider contract suite's backends: each provider driven through its real SDK or program
against a loopback model server (``tests/mocks/``), behind one small scripting surface
(:class:`Backend`), so one test states one claim for every provider.

- ``fake``: :class:`~workflow_mcp.FakeProvider`, scripted directly (it is its own model).
- ``codex``: the SDK's bundled ``codex app-server`` against the mock Responses API.
- ``claude``: the Claude Agent SDK's bundled Claude Code CLI against the mock Messages API.
- ``acp``: codex-acp (``@zed-industries/codex-acp``, installed by npm on first use) against the
  mock Responses API.
- ``openai``: the official ``openai`` SDK against the mock Chat Completions API.

A backend whose extra is not installed skips, saying which extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for folder in (_TESTS, _TESTS / "integration" / "providers"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from mocks.base import UNSET  # noqa: E402
from workflow_mcp.providers.base import AgentProvider  # noqa: E402
from workflow_mcp.providers.fake import FakeProvider  # noqa: E402

PROVIDERS = ("fake", "codex", "claude", "acp", "openai")


class Backend(Protocol):
    """One provider and the model behind it, scripted by prompt (a regular expression)."""

    name: str
    """The provider's name."""
    backend: str
    """The name its errors and pauses give (an ACP agent's own name)."""
    cwd: str
    has_login: bool
    """Whether a login can be refused (the fake has none)."""

    def provider(self) -> AgentProvider:
        """A new provider reaching this backend (the caller closes it)."""
        ...

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        """Answer prompts matching ``pattern`` with ``text`` or the JSON value ``json``."""
        ...

    def fail(self, pattern: str) -> None:
        """Answer prompts matching ``pattern`` with a server failure (HTTP 500)."""
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


class FakeBackend:
    name = backend = "fake"
    has_login = False

    def __init__(self, cwd: Path) -> None:
        self.cwd = str(cwd)
        self.rules: list[dict[str, Any]] = []

    def provider(self) -> AgentProvider:
        return FakeProvider({"rules": self.rules, "default": {"synthesize": True, "tokens": self._tokens}})

    _tokens = {"input": 10, "output": 5, "cacheRead": 1, "cacheWrite": 2}

    def _rule(self, pattern: str, respond: dict[str, Any]) -> None:
        self.rules.append({"match": {"prompt": pattern}, "respond": {**respond, "tokens": self._tokens}})

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        self._rule(pattern, {"text": text} if json is UNSET else {"result": json})

    def fail(self, pattern: str) -> None:
        self._rule(pattern, {"fail": "provider", "message": "HTTP 500: mock failure"})

    def refuse_login(self) -> None:
        raise NotImplementedError("the fake provider has no login")

    def hold(self, pattern: str) -> None:
        self._rule(pattern, {"text": "late", "delayMs": 120_000})

    async def in_flight(self, pattern: str, provider: AgentProvider) -> None:
        assert isinstance(provider, FakeProvider)
        for _ in range(1000):  # the call records itself before its first suspension
            if provider.calls:
                return
            await asyncio.sleep(0)
        raise TimeoutError("the fake call never started")

    def release(self) -> None:
        pass

    def usage(self) -> dict[str, int]:
        return dict(self._tokens)


class MockBackend:
    """A provider in front of one of the loopback model servers."""

    def __init__(self, name: str, backend: str, cwd: Path, mock: Any, reply: type, make: Any) -> None:
        self.name, self.backend, self.cwd, self.has_login = name, backend, str(cwd), True
        self.mock, self._reply, self._make = mock, reply, make
        self._usage: dict[str, int] = {}

    def provider(self) -> AgentProvider:
        provider: AgentProvider = self._make()
        return provider

    def answer(self, pattern: str, *, text: str | None = None, json: Any = UNSET) -> None:
        self.mock.on(pattern, self._reply(text=text) if json is UNSET else self._reply(json=json))

    def fail(self, pattern: str) -> None:
        self.mock.on(pattern, self._reply(status=500, message="mock failure"))

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


@pytest.fixture(params=PROVIDERS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    cwd = tmp_path / "cwd"  # the kits of claude and acp make their own
    cwd.mkdir()
    with _backend(str(request.param), tmp_path, cwd, monkeypatch) as found:
        yield found


@contextlib.contextmanager
def _backend(name: str, tmp_path: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
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
            settings = {"codex_home": str(home), "env": ["MOCK_API_KEY"]}
            found = MockBackend(
                "codex",
                "codex",
                cwd,
                mock,
                ResponsesReply,
                lambda: CodexProvider.create(settings, policy=DEFAULT_POLICY, source="test"),
            )
            found._usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0}
            yield found
    elif name == "claude":
        pytest.importorskip("claude_agent_sdk", reason="the claude extra is not installed")
        from claude_kit import claude_setup
        from mocks.mock_messages import Reply as MessagesReply

        with claude_setup(tmp_path, monkeypatch) as setup:
            found = MockBackend("claude", "claude", setup.cwd, setup.mock, MessagesReply, setup.provider)
            found._usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0}
            yield found
    elif name == "acp":
        from acp_kit import codex_acp_setup
        from mocks.mock_responses import Reply as ResponsesReply

        with codex_acp_setup(tmp_path, monkeypatch) as setup:
            found = MockBackend("acp", "codex-acp", setup.cwd, setup.mock, ResponsesReply, setup.provider)
            # Measured: codex-acp 0.16 puts no ``usage`` in its prompt responses (per-turn usage is
            # unstable in ACP v1), so the call reports none; the stub agent's tests cover an agent
            # that reports it.
            found._usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
            yield found
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
            found = MockBackend(
                "openai",
                "openai",
                cwd,
                mock,
                ChatReply,
                lambda: OpenAIProvider.create(settings, policy=DEFAULT_POLICY, source="test"),
            )
            # prompt 12 of which 2 cached, completion 4 (the mock's default usage)
            found._usage = {"input": 10, "output": 4, "cacheRead": 2, "cacheWrite": 0}
            yield found
