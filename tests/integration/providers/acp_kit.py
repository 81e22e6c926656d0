"""Shared pieces of the ACP provider tests (imported by name; ``conftest.py`` puts ``tests/`` and
this folder on ``sys.path``).

The real agent is ``@zed-industries/codex-acp`` (a node wrapper that spawns the native codex-acp),
installed once with npm into a cache folder and reused: ``$WORKFLOW_MCP_TEST_NPM`` or
``~/.cache/workflow-mcp-test/npm`` (``$WORKFLOW_MCP_CODEX_ACP`` may name a binary instead). It is
pointed at the loopback mock Responses API through an isolated ``CODEX_HOME``. Tests skip, saying
why, only when npm itself is missing; a failing install fails them.

The stub agent (``acp_stub_agent.py``) covers what the model mock cannot provoke.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_responses import MockResponses
from workflow_mcp.providers.acp import ACPProvider
from workflow_mcp.providers.base import AgentContext, AgentRequest, AgentResult, CancelSignal, ProviderEvent
from workflow_mcp.providers.config import ProviderConfig
from workflow_mcp.providers.policy import DEFAULT_POLICY, Policy
from workflow_mcp.providers.registry import register_provider, unregister_provider
from workflow_mcp.providers.routing import RoutingProvider, build_router

CODEX_ACP = "@zed-industries/codex-acp@0.16.0"
INSTALL_TIMEOUT_S = 300
STUB_AGENT = str(Path(__file__).resolve().parent / "acp_stub_agent.py")
# A model codex knows: an unknown one makes codex-acp stream a "model metadata not found" warning
# as an agent message before the answer.
MOCK_MODEL = "gpt-5.4-mini"
SDK_SKIP_REASON = "the acp extra is not installed (pip install -e '.[test,acp]')"


def npm_prefix() -> Path:
    return Path(os.environ.get("WORKFLOW_MCP_TEST_NPM") or Path.home() / ".cache/workflow-mcp-test/npm")


def codex_acp_binary() -> str:
    """The codex-acp wrapper, installed with npm on first use (bounded, under a file lock)."""
    explicit = os.environ.get("WORKFLOW_MCP_CODEX_ACP")
    if explicit:
        return explicit
    prefix = npm_prefix()
    binary = prefix / "node_modules" / ".bin" / "codex-acp"
    package = prefix / "node_modules" / "@zed-industries" / "codex-acp" / "package.json"
    wanted = CODEX_ACP.rsplit("@", 1)[1]

    def installed() -> bool:
        return binary.exists() and package.exists() and json.loads(package.read_text())["version"] == wanted

    if installed():
        return str(binary)
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so {CODEX_ACP} cannot be installed (apt-get install npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed():
            done = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", CODEX_ACP],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0 or not installed():
                pytest.fail(f"npm install {CODEX_ACP} failed ({done.returncode}): {done.stderr[-2000:]}")
    return str(binary)


@dataclass
class AcpSetup:
    """A started mock and the ``acp`` settings that point codex-acp at it."""

    mock: MockResponses
    home: Path
    cwd: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def config(self, **extra: Any) -> ProviderConfig:
        return ProviderConfig(settings={"acp": self.settings, **extra.pop("settings", {})}, **extra)

    def provider(self, policy: Policy = DEFAULT_POLICY, **settings: Any) -> ACPProvider:
        return ACPProvider.create({**self.settings, **settings}, policy=policy, source="test")

    @contextlib.asynccontextmanager
    async def router(self, **extra: Any) -> AsyncIterator[RoutingProvider]:
        """``--provider acp`` (unless ``extra`` configures routing), closed on exit."""
        forced = extra.pop("provider", None if extra else "acp")
        router = build_router(provider=forced, config=self.config(**extra), cwd=str(self.cwd))
        try:
            yield router
        finally:
            await router.aclose()


@contextlib.contextmanager
def registered() -> Iterator[None]:
    """``acp`` registered in process the way a third party would (entry points may not list it
    yet in a development install)."""
    register_provider("acp", ACPProvider)
    try:
        yield
    finally:
        unregister_provider("acp")


@contextlib.contextmanager
def codex_acp_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AcpSetup]:
    """codex-acp against a fresh mock with an isolated ``CODEX_HOME`` (the fixture's body)."""
    pytest.importorskip("acp", reason=SDK_SKIP_REASON)
    binary = codex_acp_binary()
    # The mock provider's key name (env_key in codex's config); it reaches the agent only because
    # the settings allowlist it. Any value works against the mock.
    monkeypatch.setenv("MOCK_API_KEY", "mock-key")
    cwd = tmp_path / "work"
    cwd.mkdir()
    with MockResponses() as mock, registered():
        home = tmp_path / "codex-home"
        mock.codex_config(home, model=MOCK_MODEL)
        yield AcpSetup(
            mock=mock,
            home=home,
            cwd=cwd,
            settings={"command": binary, "set_env": {"CODEX_HOME": str(home)}, "env": ["MOCK_API_KEY"]},
        )


def stub_settings(**extra: Any) -> dict[str, Any]:
    """Settings running the Python stub agent with this interpreter."""
    return {"command": sys.executable, "args": [STUB_AGENT], **extra}


async def call(
    provider: ACPProvider,
    request: AgentRequest,
    signal: CancelSignal | None = None,
    started: asyncio.Event | None = None,
) -> tuple[AgentResult, list[ProviderEvent]]:
    """One ``execute`` with a fresh context; returns the result and the events it emitted.
    ``started`` is set at the call's first event (its turn is running)."""
    events: list[ProviderEvent] = []

    async def emit(event: ProviderEvent) -> None:
        events.append(event)
        if started is not None:
            started.set()

    result = await provider.execute(request, AgentContext(signal=signal or CancelSignal(), emit=emit))
    return result, events


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def still_running(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The ``pids`` that have not exited within ``timeout`` s. Waits on a pidfd per process (it
    becomes readable when the process exits, child or not), so nothing polls or sleeps."""
    left = []
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                left.append(pid)
        finally:
            os.close(fd)
    return left


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)
