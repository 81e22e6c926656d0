"""Execution policy for agent providers: sandbox, network, writable roots, approvals, environment.

Two layers meet here (DESIGN.md, "Security defaults"): the *server/user policy* from configuration
and what a *caller* asks for (an MCP client, a CLI flag). :meth:`Policy.narrow` intersects them: a
caller can narrow every limit, never widen one; asking for more raises :class:`PolicyError` naming
the limit and where it comes from. The default is workspace-write, no network, no approvals.

Credentials stay in the provider process: a provider starts its agent program with only the
environment names of :func:`allowed_env` (a base set, the provider's own credential names and the
policy's ``env`` names; ``*`` globs allowed) and never hands any of them to the realm.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import InvalidInputError

__all__ = [
    "APPROVALS",
    "BASE_ENV",
    "DEFAULT_POLICY",
    "SANDBOX_MODES",
    "PermissionAsk",
    "PermissionDecision",
    "Policy",
    "PolicyError",
    "allowed_env",
    "answer_checkpoint",
    "decide_permission",
]

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
Approvals = Literal["never", "ask", "auto-review"]

SANDBOX_MODES: Final[tuple[SandboxMode, ...]] = ("read-only", "workspace-write", "danger-full-access")
"""Sandbox modes, narrowest first."""
APPROVALS: Final[tuple[Approvals, ...]] = ("never", "ask", "auto-review")
"""Approval modes, narrowest first: ``never`` asks nobody and refuses every escalation (fail
closed); ``ask`` turns an escalation the policy cannot vouch for into a durable human checkpoint
(an elicitation while a client waits on the run, else the run pauses ``checkpoint_required``);
``auto-review`` lets the agent's own reviewer approve escalations."""

BASE_ENV: Final[tuple[str, ...]] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "ALL_PROXY",
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
)
"""Environment names every provider process may see: what a program needs to run, no secrets."""


class PolicyError(InvalidInputError):
    """Raised when a policy is malformed or a caller asks for more than the server policy allows.

    ``key`` names the limit (``sandbox``, ``network``, ``writable_roots``, ``approvals``, ``env``);
    ``source`` says where the limit comes from (a config file, or ``default policy``).
    """

    def __init__(self, key: str, problem: str, *, source: str = "default policy") -> None:
        self.key = key
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: policy.{key}: {problem}")


@dataclass(frozen=True)
class Policy:
    """What an agent may do.

    ``sandbox``: one of :data:`SANDBOX_MODES`. ``network``: outbound network from the agent's
    commands. ``writable_roots``: absolute directories writable besides the working directory
    (workspace-write only). ``approvals``: one of :data:`APPROVALS`. ``env``: extra environment
    names (globs) the provider process may see, e.g. a custom model provider's key name.
    ``source`` names where the policy came from, for error messages.
    """

    sandbox: SandboxMode = "workspace-write"
    network: bool = False
    writable_roots: tuple[str, ...] = ()
    approvals: Approvals = "never"
    env: tuple[str, ...] = ()
    source: str = field(default="default policy", compare=False)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], *, source: str, base: Policy | None = None) -> Policy:
        """Parse a ``[policy]`` table (keys ``sandbox``, ``network``, ``writable_roots``,
        ``approvals``, ``env``) over ``base`` (default: :data:`DEFAULT_POLICY`).

        Raises :class:`PolicyError` naming ``source`` and the key for an unknown key or a bad value.
        """
        start = base or DEFAULT_POLICY
        known = {"sandbox", "network", "writable_roots", "approvals", "env"}
        for key in raw:
            if key not in known:
                raise PolicyError(
                    str(key), f"unknown key; expected one of {', '.join(sorted(known))}", source=source
                )
        sandbox = raw.get("sandbox", start.sandbox)
        if sandbox not in SANDBOX_MODES:
            raise PolicyError(
                "sandbox", f"must be one of {', '.join(SANDBOX_MODES)}, got {sandbox!r}", source=source
            )
        network = raw.get("network", start.network)
        if not isinstance(network, bool):
            raise PolicyError("network", f"must be true or false, got {network!r}", source=source)
        approvals = raw.get("approvals", start.approvals)
        if approvals not in APPROVALS:
            raise PolicyError(
                "approvals", f"must be one of {', '.join(APPROVALS)}, got {approvals!r}", source=source
            )
        roots = _strings(raw.get("writable_roots", list(start.writable_roots)), "writable_roots", source)
        for root in roots:
            if not os.path.isabs(os.path.expanduser(root)):
                raise PolicyError("writable_roots", f"{root!r} is not an absolute path", source=source)
        env = _strings(raw.get("env", list(start.env)), "env", source)
        return cls(
            sandbox=sandbox,
            network=network,
            writable_roots=tuple(os.path.normpath(os.path.expanduser(r)) for r in roots),
            approvals=approvals,
            env=tuple(env),
            source=source,
        )

    def narrow(self, asked: Mapping[str, Any] | Policy | None) -> Policy:
        """The intersection of this (server) policy with what a caller ``asked`` for.

        Keys the caller leaves out keep this policy's value. Raises :class:`PolicyError` when the
        caller asks for more: a wider sandbox, network this policy denies, a writable root outside
        this policy's roots, approvals this policy does not allow, or environment names it does not
        pass.
        """
        if asked is None:
            return self
        raw = asked.to_mapping() if isinstance(asked, Policy) else dict(asked)
        wanted = Policy.from_mapping(raw, source="caller", base=self)
        where = self.source
        if SANDBOX_MODES.index(wanted.sandbox) > SANDBOX_MODES.index(self.sandbox):
            raise PolicyError(
                "sandbox",
                f"{wanted.sandbox!r} was asked for, wider than the allowed {self.sandbox!r}",
                source=where,
            )
        if wanted.network and not self.network:
            raise PolicyError(
                "network", "network access was asked for, and this policy denies it", source=where
            )
        if APPROVALS.index(wanted.approvals) > APPROVALS.index(self.approvals):
            raise PolicyError(
                "approvals",
                f"{wanted.approvals!r} was asked for, wider than the allowed {self.approvals!r}",
                source=where,
            )
        for root in wanted.writable_roots:
            if not any(_within(root, allowed) for allowed in self.writable_roots):
                raise PolicyError(
                    "writable_roots",
                    f"writing {root!r} was asked for, outside the allowed roots",
                    source=where,
                )
        for name in wanted.env:
            if name not in self.env:
                raise PolicyError(
                    "env", f"passing {name!r} was asked for, and this policy does not pass it", source=where
                )
        return Policy(
            sandbox=wanted.sandbox,
            network=wanted.network,
            writable_roots=wanted.writable_roots if "writable_roots" in raw else self.writable_roots,
            approvals=wanted.approvals,
            env=wanted.env if "env" in raw else self.env,
            source=f"{self.source} narrowed by the caller",
        )

    def to_mapping(self) -> dict[str, Any]:
        """``{"sandbox", "network", "writable_roots", "approvals", "env"}`` (JSON-ready)."""
        return {
            "sandbox": self.sandbox,
            "network": self.network,
            "writable_roots": list(self.writable_roots),
            "approvals": self.approvals,
            "env": list(self.env),
        }


DEFAULT_POLICY: Final = Policy()
"""workspace-write, no network, no approvals, no extra environment (DESIGN.md)."""


def allowed_env(
    policy: Policy, provider_names: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a provider process may see: the names in :data:`BASE_ENV`,
    ``provider_names`` (the provider's own credential names) and ``policy.env``, taken from
    ``environ`` (default ``os.environ``). Names may be ``fnmatch`` globs (``LC_*``)."""
    source = os.environ if environ is None else environ
    patterns = [*BASE_ENV, *provider_names, *policy.env]
    return {k: v for k, v in source.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}


def _strings(value: Any, key: str, source: str) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(key, f"must be a list of non-empty strings, got {value!r}", source=source)
    return list(value)


def _within(path: str, root: str) -> bool:
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


# -- permission requests ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PermissionAsk:
    """What an agent asked permission for (``session/request_permission``): the tool ``kind``
    (ACP ToolKind: read, edit, delete, move, search, execute, think, fetch, switch_mode, other;
    ``None`` when not given), its ``title``, the file ``paths`` it touches, and the ``options``
    offered as ``(optionId, kind)`` pairs (kind: allow_once, allow_always, reject_once,
    reject_always). ``command`` is the command line an ``execute`` call would run, when its
    ``rawInput`` names one."""

    kind: str | None
    title: str = ""
    paths: tuple[str, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    command: str | None = None


@dataclass(frozen=True)
class PermissionDecision:
    """The answer: ``allow`` or not, the ``option_id`` selected (``None``: answered ``cancelled``,
    when no fitting option was offered), and the ``reason`` in words. ``ask``: the policy cannot
    vouch for the request but ``approvals = "ask"`` lets a human decide (the decision stands as a
    refusal until one does)."""

    allow: bool
    option_id: str | None
    reason: str
    ask: bool = False


def decide_permission(policy: Policy, ask: PermissionAsk, *, cwd: str) -> PermissionDecision:
    """Answer a permission request from ``policy`` alone (DESIGN.md "Security defaults": fail
    closed when nobody can approve). Nobody is asked, so only what the policy vouches for is
    allowed:

    - ``read``, ``search``, ``think``: allowed (every sandbox mode reads).
    - ``edit``, ``delete``, ``move``: denied under ``read-only``; allowed under
      ``danger-full-access``; under ``workspace-write`` allowed only when the request names its
      paths and every one lies in ``cwd`` or a ``writable_roots`` entry.
    - ``fetch``: allowed only with ``network``.
    - ``execute``, ``switch_mode``, ``other`` or no kind: what the command does cannot be checked
      here, so allowed only under ``danger-full-access`` or when ``approvals`` is ``auto-review``
      (the agent's own review is trusted); with ``approvals = "ask"`` denied with ``ask`` set, for a
      human checkpoint to decide; with ``approvals = "never"`` denied. The policy only narrows what
      is asked: what it allows or denies outright is never put to a human.

    An allowed request selects ``allow_once`` (else ``allow_always``); a denied one selects
    ``reject_once`` (else ``reject_always``, else the answer is ``cancelled``). Never raises.
    """
    verdict, reason = _judge(policy, ask, cwd)
    if verdict is None:
        return _refusal(ask, reason, ask_human=True)
    allow = verdict
    kinds = dict((kind, option) for option, kind in reversed(ask.options))
    if allow:
        option = kinds.get("allow_once") or kinds.get("allow_always")
        if option is not None:
            return PermissionDecision(True, option, reason)
        reason = f"{reason}, but the agent offered no allow option"
    return _refusal(ask, reason)


def answer_checkpoint(ask: PermissionAsk, allow: bool, source: str) -> PermissionDecision:
    """The answer to a request a human checkpoint decided (``source``: who decided, in words)."""
    if allow:
        kinds = dict((kind, option) for option, kind in reversed(ask.options))
        option = kinds.get("allow_once") or kinds.get("allow_always")
        if option is not None:
            return PermissionDecision(True, option, f"allowed by {source}")
        return _refusal(ask, f"allowed by {source}, but the agent offered no allow option")
    return _refusal(ask, f"denied by {source}")


def _refusal(ask: PermissionAsk, reason: str, *, ask_human: bool = False) -> PermissionDecision:
    kinds = dict((kind, option) for option, kind in reversed(ask.options))
    option = kinds.get("reject_once") or kinds.get("reject_always")
    return PermissionDecision(False, option, reason, ask=ask_human)


def _judge(policy: Policy, ask: PermissionAsk, cwd: str) -> tuple[bool | None, str]:
    kind = ask.kind or "other"
    if kind in ("read", "search", "think"):
        return True, f"{kind} is allowed by every sandbox mode"
    if kind in ("edit", "delete", "move"):
        if policy.sandbox == "read-only":
            return False, f"{kind} is denied by the read-only sandbox"
        if policy.sandbox == "danger-full-access":
            return True, f"{kind} is allowed by danger-full-access"
        if not ask.paths:
            return False, f"{kind} names no path, so it cannot be checked against the writable roots"
        roots = [os.path.abspath(cwd), *(os.path.abspath(r) for r in policy.writable_roots)]
        for path in ask.paths:
            full = os.path.abspath(os.path.join(cwd, path))
            if not any(_within(full, root) for root in roots):
                return False, f"{kind} of {full} is outside the working directory and the writable roots"
        return True, f"{kind} inside the writable roots is allowed by workspace-write"
    if kind == "fetch":
        if policy.network:
            return True, "fetch is allowed: the policy allows network access"
        return False, "fetch is denied: the policy denies network access"
    if policy.sandbox == "danger-full-access":
        return True, f"{kind} is allowed by danger-full-access"
    if policy.approvals == "auto-review":
        return True, f"{kind} is allowed: approvals are auto-review"
    if policy.approvals == "ask":
        return None, f"{kind} cannot be checked against the policy, so a human is asked (approvals: ask)"
    return False, f"{kind} cannot be checked against the policy and nobody can approve it (approvals: never)"
