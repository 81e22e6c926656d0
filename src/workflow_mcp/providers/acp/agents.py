"""The ACP agents the ``acp`` provider knows by program name: their default arguments, credential
environment names, login and install hints, and how the policy becomes each one's own flags."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..policy import Policy

__all__ = ["KNOWN_AGENTS", "KnownAgent", "codex_policy_args", "find_known_agent", "known_agent", "none_found"]


@dataclass(frozen=True)
class KnownAgent:
    """An ACP agent this provider knows by its program name (the command's basename): the
    ``args`` it runs with when the settings give none, the environment names holding its
    credentials (always passed to it), ``policy_args`` turning the policy into its own flags
    (appended last, so settings cannot widen the policy), how to log in and how to install it."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    login_hint: str | None = None
    install: str | None = None
    policy_args: Callable[[Policy], tuple[str, ...]] | None = None
    system_prompt_meta: bool = False
    """Whether ``session/new`` takes a system prompt as ``_meta.systemPrompt`` (claude-agent-acp)."""
    preset: str | None = None
    """The provider name it is found under when on ``PATH`` (:mod:`workflow_mcp.providers.named`)."""
    reports_version: bool = False
    """Whether ``<command> --version`` prints its version and exits (probed for the matrix)."""


def codex_policy_args(policy: Policy) -> tuple[str, ...]:
    """The policy as Codex config overrides (``-c key=value``): sandbox mode, network and writable
    roots of workspace-write, and approvals (``never``: Codex refuses every escalation itself;
    ``auto-review``: ``on-request``, each escalation asked of us and answered by
    :func:`decide_permission`)."""
    values: dict[str, Any] = {
        "sandbox_mode": policy.sandbox,
        "approval_policy": "never" if policy.approvals == "never" else "on-request",
        "sandbox_workspace_write.network_access": policy.network,
        "sandbox_workspace_write.writable_roots": list(policy.writable_roots),
    }
    return tuple(arg for key, value in values.items() for arg in ("-c", f"{key}={json.dumps(value)}"))


_CLAUDE_ENV: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "IS_SANDBOX",
)
KNOWN_AGENTS: Final[tuple[KnownAgent, ...]] = (
    KnownAgent(
        "codex-acp",
        # Codex's per-session login-shell snapshot sources the user's rc files (outside the
        # environment allowlist) and doubles a 20-way fan-out's wall time against a mock model.
        ("-c", "features.shell_snapshot=false"),
        env=("CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RUST_LOG"),
        login_hint="codex login",
        install="npm install -g @zed-industries/codex-acp",
        policy_args=codex_policy_args,
        preset="codex-acp",
    ),
    KnownAgent(
        "claude-agent-acp",
        env=_CLAUDE_ENV,
        login_hint="claude /login",
        install="npm install -g @agentclientprotocol/claude-agent-acp",
        system_prompt_meta=True,
        preset="claude-agent-acp",
    ),
    KnownAgent("claude-code-acp", env=_CLAUDE_ENV, login_hint="claude /login", system_prompt_meta=True),
    KnownAgent(
        "gemini",
        ("--experimental-acp",),
        env=(
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GEMINI_BASE_URL",
            "GEMINI_MODEL",
        ),
        login_hint="gemini (log in once interactively) or set GEMINI_API_KEY",
        install="npm install -g @google/gemini-cli",
        preset="gemini",
        reports_version=True,
    ),
    KnownAgent(
        "opencode",
        ("acp",),
        env=("OPENCODE_*",),
        login_hint="opencode auth login",
        install="npm install -g opencode-ai",
        preset="opencode",
        reports_version=True,
    ),
    KnownAgent(
        "qwen",
        ("--acp",),
        env=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY", "QWEN_*"),
        login_hint="qwen (log in once interactively) or set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL",
        install="npm install -g @qwen-code/qwen-code",
        preset="qwen",
        reports_version=True,
    ),
    KnownAgent(
        "goose",
        ("acp",),
        env=("GOOSE_*",),
        login_hint="goose configure",
        install="see https://block.github.io/goose/docs/getting-started/installation",
        preset="goose",
        reports_version=True,
    ),
)
"""ACP agents found on PATH without configuration, in this order."""


def known_agent(command: str) -> KnownAgent | None:
    """The known agent whose program name is ``command``'s basename, if any."""
    base = os.path.basename(command)
    return next((k for k in KNOWN_AGENTS if k.command == base), None)


def find_known_agent() -> KnownAgent | None:
    """The first of :data:`KNOWN_AGENTS` on ``PATH``, if any."""
    return next((k for k in KNOWN_AGENTS if shutil.which(k.command)), None)


def none_found() -> str:
    """The error text when no agent is configured and none is on ``PATH``."""
    names = ", ".join(k.command for k in KNOWN_AGENTS)
    return f"no ACP agent configured and none found on PATH (looked for {names}); set [providers.acp] command"
