"""Provider configuration: ``workflow-mcp.toml`` (project) and ``~/.workflow-mcp/config.toml`` (user).

Where it is read from (:func:`find_config`):

1. the nearest ``workflow-mcp.toml`` from the working directory up to the filesystem root (the
   *project* file) — it decides routing;
2. otherwise ``$WORKFLOW_MCP_HOME/config.toml`` (default ``~/.workflow-mcp/config.toml``, the *user*
   file).

The user file's ``[policy]`` is the ceiling for every run; a project file's ``[policy]`` can only
narrow it (a repository cannot grant itself network access or a wider sandbox).

Format (every key optional)::

    default = "codex"                  # provider for calls no rule matches
    fallback = ["claude", "acp"]       # tried in order when a provider fails (see routing.py)

    [policy]                           # callers may narrow, never widen (policy.py)
    sandbox = "workspace-write"        # read-only | workspace-write | danger-full-access
    network = false
    writable_roots = []                # absolute paths writable besides the working directory
    approvals = "never"                # never | ask (human checkpoints) | auto-review
    env = []                           # extra environment names (globs) providers may see

    [limits]                           # per-call defaults of every run here (integers, > 0 except retries)
    agent_timeout_ms = 600000          # bound each agent call (default: none beyond the stall window)
    stall_ms = 180000                  # stall window of calls without stallMs (profile default 180 s)
    rate_limit_retries = 4             # retries of a 429/overloaded answer (0: none)
    rate_limit_base_ms = 1000          # first backoff, doubled each retry (with jitter) …
    rate_limit_max_ms = 60000          # … up to this; a Retry-After is honoured instead

    [[rules]]                          # first match wins; each given key must hold (globs: * and ?)
    phase = "Review*"
    label = "security-*"
    model = "opus"
    agentType = "reviewer"
    provider = "claude"

    [realm]                            # the Node worker that runs workflow code
    sandbox = "bwrap"                  # none | bwrap (bubblewrap OS sandbox; a project file may turn it
                                       # on, never off when the user file turns it on)

    executor = "ray"                   # where live agent calls run: local (default) | ray
    ray_address = "10.0.0.5:6379"      # the Ray cluster (default: $RAY_ADDRESS, else a local one);
                                       # both keys only in the user file (engine/executor.py)

    [estimates]                        # what `workflow-mcp plan` assumes per call (estimates.py)
    input_tokens = 20000

    [auto_resume]                      # `workflow-mcp serve` resumes runs paused for a usage limit
    enabled = true                     # (serve --auto-resume / --no-auto-resume decide instead)
    attempts = 5                       # resumes per paused run and the runs resuming it (1..1000)
    backoff_s = 60                     # seconds between attempts, doubled each time …
    max_backoff_s = 3600               # … up to this

    [providers.codex]                  # settings handed to that provider (its docstring lists them)
    model = "gpt-5.5"
    [providers.codex.models]           # model alias map: workflow model -> provider model
    sonnet = "gpt-5.5"
    opus = "gpt-5.5"
    haiku = "gpt-5.5-mini"

    [providers.reviewer]               # a *named* provider: any name, built by the provider `use`
    use = "acp"                        # names (acp, cli, codex, claude, openai, fake …), with its
    command = "gemini"                 # own settings; rules, default, fallback and --provider
    args = ["--experimental-acp"]      # route to it by its name (named.py)

A table without ``use`` configures the registered provider (or preset, :mod:`.presets`) of its
name. ``use`` and the settings of :data:`USER_ONLY_KEYS` choose what runs on this machine, so only
the user's own file may set them; a project file routes to the names the user file defines, and its
``[providers.NAME]`` tables add other settings (a model, an alias map) over the user's.

Errors: :class:`ProviderConfigError` names the file and the key (``rules[1].provider``), before any
agent runs.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from ..errors import InvalidInputError
from .estimates import DEFAULT_ESTIMATES, Estimates, parse_estimates
from .policy import DEFAULT_POLICY, Policy, PolicyError

__all__ = [
    "AUTO_RESUME_KEYS",
    "CONFIG_FILE_NAME",
    "LIMIT_KEYS",
    "NO_CONFIG",
    "USER_CONFIG_NAME",
    "USER_ONLY_KEYS",
    "ProviderConfig",
    "ProviderConfigError",
    "Rule",
    "find_config",
    "load_config",
    "parse_config",
    "user_config_path",
]

CONFIG_FILE_NAME: Final = "workflow-mcp.toml"
NO_CONFIG: Final = "no configuration file"
"""What :attr:`ProviderConfig.where` says when no configuration file applies."""
USER_CONFIG_NAME: Final = "config.toml"
_TOP_KEYS: Final = (
    "default",
    "fallback",
    "policy",
    "limits",
    "rules",
    "providers",
    "estimates",
    "auto_resume",
    "realm",
    "executor",
    "ray_address",
)
SANDBOXES: Final = ("none", "bwrap")
"""The values of ``[realm] sandbox`` (:mod:`workflow_mcp.realm.sandbox`)."""
EXECUTORS: Final = ("local", "ray")
"""The values of ``executor`` (:mod:`workflow_mcp.engine.executor`)."""
LIMIT_KEYS: Final = (
    "agent_timeout_ms",
    "stall_ms",
    "rate_limit_retries",
    "rate_limit_base_ms",
    "rate_limit_max_ms",
)
"""The keys of ``[limits]``: per-call defaults of the runs the file applies to."""
AUTO_RESUME_KEYS: Final = ("enabled", "attempts", "backoff_s", "max_backoff_s")
"""The keys of ``[auto_resume]``: how ``workflow-mcp serve`` resumes usage-limit-paused runs."""
_RULE_KEYS: Final = ("phase", "label", "model", "agentType", "provider")
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ProviderConfigError(InvalidInputError):
    """Raised when provider configuration is unusable; the message names ``path`` and ``key``."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")


@dataclass(frozen=True)
class Rule:
    """One routing rule: each given glob (``*``, ``?``; case-sensitive) must match the call's
    value; a glob never matches a call without that value. ``index`` is its place in ``rules``."""

    provider: str
    index: int
    phase: str | None = None
    label: str | None = None
    model: str | None = None
    agent_type: str | None = None

    def matches(self, *, phase: str | None, label: str, model: str | None, agent_type: str | None) -> bool:
        for pattern, value in (
            (self.phase, phase),
            (self.label, label),
            (self.model, model),
            (self.agent_type, agent_type),
        ):
            if pattern is not None and (value is None or not _glob(pattern, value)):
                return False
        return True

    @property
    def key(self) -> str:
        return f"rules[{self.index}]"


@dataclass(frozen=True)
class ProviderConfig:
    """Parsed configuration. ``path`` is the file routing came from (``None``: no file);
    ``settings`` maps a provider name to the settings handed to it; ``models`` to its alias map;
    ``uses`` maps a named provider to the registered provider its ``use`` names (only tables that
    set ``use``); ``policy`` is the effective server/user policy; ``limits`` the ``[limits]`` table (keys of
    :data:`LIMIT_KEYS`, integer values); ``estimates`` what a cost preview assumes per call
    (``[estimates]``, :mod:`~workflow_mcp.providers.estimates`); ``auto_resume`` the ``[auto_resume]``
    table, checked (keys of :data:`AUTO_RESUME_KEYS`: ``enabled`` a boolean, ``attempts`` an integer
    from 1 to 1,000, ``backoff_s`` and ``max_backoff_s`` non-negative seconds, backoff ≤ max); ``sandbox`` the realm worker's OS
    sandbox (``[realm] sandbox``: ``none`` or ``bwrap``); ``executor`` and ``ray_address`` where live
    agent calls run (``local`` or ``ray``, and the Ray cluster's address; user file only)."""

    path: str | None = None
    default: str | None = None
    fallback: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    uses: Mapping[str, str] = field(default_factory=dict)
    policy: Policy = DEFAULT_POLICY
    limits: Mapping[str, int] = field(default_factory=dict)
    estimates: Estimates = DEFAULT_ESTIMATES
    auto_resume: Mapping[str, Any] = field(default_factory=dict)
    sandbox: str = "none"
    executor: str = "local"
    ray_address: str | None = None

    @property
    def where(self) -> str:
        """The file name for messages (``"no configuration file"`` when there is none)."""
        return self.path or NO_CONFIG

    @property
    def configured(self) -> bool:
        """Whether the file chooses a provider (a ``default`` or any rule)."""
        return self.default is not None or bool(self.rules)


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$WORKFLOW_MCP_HOME/config.toml``, default ``~/.workflow-mcp/config.toml``."""
    env = os.environ if environ is None else environ
    home = env.get("WORKFLOW_MCP_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".workflow-mcp"
    )
    return Path(home) / USER_CONFIG_NAME


def find_config(
    cwd: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The project file (nearest ``workflow-mcp.toml`` from ``cwd`` up), else the user file if it
    exists, else ``None``."""
    here = Path(cwd or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate
    user = user_config_path(environ)
    return user if user.is_file() else None


USER_ONLY_KEYS: Final = frozenset(
    {
        "use",
        "command",
        "args",
        "bin",
        "cli_path",
        "set_env",
        "base_url",
        # the environment: extra names a provider's process sees (added to the policy's), the
        # variable read as an endpoint's key
        "env",
        "api_key_env",
        # the agent's own configuration (its hooks, MCP servers, model provider, sandbox), where it works
        # and its permission mode, each of which can run commands or widen the policy
        "config_dir",
        "codex_home",
        "config",
        "cwd",
        "mode",
        "session_config",
    }
)
"""Provider settings that pick a provider, an executable, its arguments, its environment (``env``,
``set_env``, ``api_key_env``), an endpoint, the agent's own configuration (``config_dir``,
``codex_home``, Codex's ``config`` overrides), its working directory or an ACP session's mode and
options: a project file (which arrives with a repository) may not set them; only the user's own file
may."""


def load_config(
    cwd: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
) -> ProviderConfig:
    """Read the configuration that applies in ``cwd`` (or the file ``path``).

    The user file's policy is the ceiling; a project file's policy narrows it, and a project file
    without ``[estimates]`` keeps the user file's. Returns an empty
    :class:`ProviderConfig` when no file exists. Raises :class:`ProviderConfigError` (file, key)
    for malformed TOML, unknown keys or wrong types.
    """
    user = user_config_path(environ)
    ceiling = DEFAULT_POLICY
    user_data: Mapping[str, Any] | None = None
    user_sandbox = "none"
    placement: dict[str, Any] = {}
    if user.is_file():
        user_data = _read(user)
        ceiling = _policy(user_data, str(user), DEFAULT_POLICY, narrow=False)
        user_sandbox = _sandbox(user_data.get("realm", {}), str(user))
        placement = _placement(user_data, str(user))
    chosen = Path(path) if path is not None else find_config(cwd, environ)
    if chosen is None:
        return ProviderConfig(policy=ceiling, sandbox=user_sandbox, **placement)
    if user_data is not None and chosen.resolve() == user.resolve():
        return parse_config(user_data, str(user), ceiling=DEFAULT_POLICY, narrow=False)
    project = _read(chosen)
    conf = parse_config(project, str(chosen), ceiling=ceiling, narrow=True)
    if user_data is not None and "providers" in user_data:
        conf = _over_user_providers(conf, parse_config(user_data, str(user), narrow=False))
    if "estimates" not in project and user_data is not None and "estimates" in user_data:
        # Prices are the user's business: a project file that says nothing about them keeps theirs.
        conf = replace(conf, estimates=parse_config(user_data, str(user), narrow=False).estimates)
    if user_sandbox != "none":  # a repository may add the sandbox, never take the user's away
        conf = replace(conf, sandbox=user_sandbox)
    return replace(conf, **placement) if placement else conf


def _over_user_providers(project: ProviderConfig, user: ProviderConfig) -> ProviderConfig:
    """``project`` with the user file's provider tables underneath: the user's named providers and
    settings (programs, endpoints) stay, and each project table's keys replace the user's same keys
    (an alias map merges key by key)."""
    settings = {name: dict(table) for name, table in user.settings.items()}
    models = {name: dict(table) for name, table in user.models.items()}
    for name, table in project.settings.items():
        settings[name] = {**settings.get(name, {}), **table}
    for name, table in project.models.items():
        models[name] = {**models.get(name, {}), **table}
    return replace(project, settings=settings, models=models, uses=dict(user.uses))


def parse_config(
    data: Mapping[str, Any], source: str, *, ceiling: Policy = DEFAULT_POLICY, narrow: bool = False
) -> ProviderConfig:
    """Validate one parsed TOML document from ``source``. ``ceiling`` is the policy it may narrow
    (``narrow=True``) or replace (``narrow=False``, the user file). Provider names are checked
    for shape here and for existence by the registry (routing.py)."""
    for key in data:
        if key not in _TOP_KEYS:
            raise ProviderConfigError(
                source, str(key), f"unknown key; expected one of {', '.join(_TOP_KEYS)}"
            )
        if narrow and key in ("executor", "ray_address"):
            raise ProviderConfigError(
                source,
                str(key),
                f"decides which machines run the agents, so it may be set only in the user "
                f"configuration ({user_config_path()})",
            )
    default = data.get("default")
    if default is not None:
        _name(default, source, "default")
    fallback = data.get("fallback", [])
    if not isinstance(fallback, list):
        raise ProviderConfigError(
            source, "fallback", f"must be a list of provider names, got {_kind(fallback)}"
        )
    for i, name in enumerate(fallback):
        _name(name, source, f"fallback[{i}]")
    rules = tuple(
        _rule(raw, i, source) for i, raw in enumerate(_list(data.get("rules", []), source, "rules"))
    )
    providers = data.get("providers", {})
    if not isinstance(providers, Mapping):
        raise ProviderConfigError(
            source, "providers", f"must be a table of provider tables, got {_kind(providers)}"
        )
    settings: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, str]] = {}
    uses: dict[str, str] = {}
    for name, table in providers.items():
        key = f"providers.{name}"
        _name(name, source, key)
        if not isinstance(table, Mapping):
            raise ProviderConfigError(source, key, f"must be a table, got {_kind(table)}")
        body = dict(table)
        if narrow:
            for risky in sorted(USER_ONLY_KEYS & set(body)):
                raise ProviderConfigError(
                    source,
                    f"{key}.{risky}",
                    "chooses a provider, a program or its environment, so it may be set only in the user "
                    f"configuration ({user_config_path()}): a repository must not decide what runs "
                    "on this machine",
                )
        use = body.pop("use", None)
        if use is not None:
            _name(use, source, f"{key}.use")
            uses[name] = use
        aliases = body.pop("models", {})
        if not isinstance(aliases, Mapping):
            raise ProviderConfigError(
                source, f"{key}.models", f"must be a table of model names, got {_kind(aliases)}"
            )
        for alias, target in aliases.items():
            if not isinstance(target, str) or not target:
                raise ProviderConfigError(
                    source, f"{key}.models.{alias}", f"must be a non-empty model name, got {target!r}"
                )
        settings[name] = body
        models[name] = dict(aliases)
    policy = _policy(data, source, ceiling, narrow=narrow)
    limits = _limits(data.get("limits", {}), source)
    estimates = (
        parse_estimates(data["estimates"], lambda key, problem: ProviderConfigError(source, key, problem))
        if "estimates" in data
        else DEFAULT_ESTIMATES
    )
    auto_resume = _auto_resume(data.get("auto_resume", {}), source)
    return ProviderConfig(
        path=source,
        default=default,
        fallback=tuple(fallback),
        rules=rules,
        settings=settings,
        models=models,
        uses=uses,
        policy=policy,
        limits=limits,
        estimates=estimates,
        auto_resume=auto_resume,
        sandbox=_sandbox(data.get("realm", {}), source),
        **_placement(data, source),
    )


def _placement(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The user file's ``executor`` and ``ray_address`` (only those it sets)."""
    out: dict[str, Any] = {}
    if "executor" in data:
        if data["executor"] not in EXECUTORS:
            raise ProviderConfigError(
                source, "executor", f"must be one of {', '.join(EXECUTORS)}, got {data['executor']!r}"
            )
        out["executor"] = data["executor"]
    if "ray_address" in data:
        address = data["ray_address"]
        if not isinstance(address, str) or not address.strip():
            raise ProviderConfigError(
                source, "ray_address", f'must be a Ray address such as "HOST:6379", got {address!r}'
            )
        out["ray_address"] = address.strip()
    return out


def _auto_resume(raw: Any, source: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ProviderConfigError(source, "auto_resume", f"must be a table, got {_kind(raw)}")
    for key in raw:
        if key not in AUTO_RESUME_KEYS:
            raise ProviderConfigError(
                source, f"auto_resume.{key}", f"unknown key; expected one of {', '.join(AUTO_RESUME_KEYS)}"
            )
    if "enabled" in raw and not isinstance(raw["enabled"], bool):
        raise ProviderConfigError(
            source, "auto_resume.enabled", f"must be true or false, got {raw['enabled']!r}"
        )
    attempts = raw.get("attempts", 1)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise ProviderConfigError(
            source, "auto_resume.attempts", f"must be an integer from 1 to 1000, got {attempts!r}"
        )
    for key in ("backoff_s", "max_backoff_s"):
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2**31:
            raise ProviderConfigError(
                source, f"auto_resume.{key}", f"must be a number of seconds from 0 to {2**31}, got {value!r}"
            )
    if "backoff_s" in raw and "max_backoff_s" in raw and raw["backoff_s"] > raw["max_backoff_s"]:
        raise ProviderConfigError(
            source,
            "auto_resume.backoff_s",
            f"must not exceed max_backoff_s ({raw['max_backoff_s']}), got {raw['backoff_s']}",
        )
    return dict(raw)


def _sandbox(raw: Any, source: str) -> str:
    """``[realm] sandbox`` of one file (``"none"`` when absent)."""
    if not isinstance(raw, Mapping):
        raise ProviderConfigError(source, "realm", f"must be a table, got {_kind(raw)}")
    for key in raw:
        if key != "sandbox":
            raise ProviderConfigError(source, f"realm.{key}", "unknown key; expected sandbox")
    value = raw.get("sandbox", "none")
    if value not in SANDBOXES:
        raise ProviderConfigError(
            source, "realm.sandbox", f"must be one of {', '.join(SANDBOXES)}, got {value!r}"
        )
    return str(value)


def _limits(raw: Any, source: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise ProviderConfigError(source, "limits", f"must be a table, got {_kind(raw)}")
    out: dict[str, int] = {}
    for key, value in raw.items():
        if key not in LIMIT_KEYS:
            raise ProviderConfigError(
                source, f"limits.{key}", f"unknown key; expected one of {', '.join(LIMIT_KEYS)}"
            )
        lowest = 0 if key == "rate_limit_retries" else 1
        if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= 2**40:
            raise ProviderConfigError(
                source, f"limits.{key}", f"must be an integer from {lowest} to {2**40}, got {value!r}"
            )
        out[key] = value
    return out


#: workflow-mcp limit: configuration files are small; a larger one is refused before parsing.
MAX_CONFIG_BYTES: Final = 1024 * 1024


def _read(path: Path) -> Mapping[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ProviderConfigError(str(path), "", f"cannot read the file: {exc.strerror or exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ProviderConfigError(
            str(path),
            "",
            f"the file is over {MAX_CONFIG_BYTES:,} bytes (workflow-mcp limit for configuration)",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProviderConfigError(
            str(path),
            "",
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); TOML files are UTF-8",
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProviderConfigError(str(path), "", f"not valid TOML: {exc}") from exc
    except RecursionError:
        raise ProviderConfigError(
            str(path), "", "arrays or tables are nested too deeply to read; flatten the configuration"
        ) from None


def _policy(data: Mapping[str, Any], source: str, ceiling: Policy, *, narrow: bool) -> Policy:
    raw = data.get("policy")
    if raw is None:
        return ceiling
    if not isinstance(raw, Mapping):
        raise ProviderConfigError(source, "policy", f"must be a table, got {_kind(raw)}")
    try:
        parsed = Policy.from_mapping(raw, source=source, base=ceiling)
    except PolicyError as exc:
        raise ProviderConfigError(source, f"policy.{exc.key}", exc.problem) from exc
    if not narrow:
        return parsed
    try:
        return ceiling.narrow(raw)
    except PolicyError as exc:
        raise ProviderConfigError(
            source,
            f"policy.{exc.key}",
            f"{exc.problem} by {exc.source}; a project file can only narrow the user policy "
            f"(allow it in {user_config_path()} or remove it here)",
        ) from exc


def _rule(raw: Any, index: int, source: str) -> Rule:
    key = f"rules[{index}]"
    if not isinstance(raw, Mapping):
        raise ProviderConfigError(source, key, f"must be a table, got {_kind(raw)}")
    for k in raw:
        if k not in _RULE_KEYS:
            raise ProviderConfigError(
                source, f"{key}.{k}", f"unknown key; expected one of {', '.join(_RULE_KEYS)}"
            )
    if "provider" not in raw:
        raise ProviderConfigError(source, f"{key}.provider", "is required")
    _name(raw["provider"], source, f"{key}.provider")
    globs: dict[str, str | None] = {}
    for k in ("phase", "label", "model", "agentType"):
        value = raw.get(k)
        if value is not None and (not isinstance(value, str) or not value):
            raise ProviderConfigError(
                source, f"{key}.{k}", f"must be a non-empty string (a glob), got {value!r}"
            )
        globs[k] = value
    if not any(globs.values()):
        raise ProviderConfigError(
            source, key, "matches every call; give phase, label, model or agentType (or use `default`)"
        )
    return Rule(
        provider=raw["provider"],
        index=index,
        phase=globs["phase"],
        label=globs["label"],
        model=globs["model"],
        agent_type=globs["agentType"],
    )


def _list(value: Any, source: str, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProviderConfigError(source, key, f"must be a list (use [[{key}]] tables), got {_kind(value)}")
    return value


def _name(value: Any, source: str, key: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ProviderConfigError(source, key, f"must be a provider name like 'codex', got {value!r}")
    return value


def _glob(pattern: str, value: str) -> bool:
    # `[` is literal (like the fake provider's label globs); only * and ? are wildcards.
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def _kind(value: Any) -> str:
    return type(value).__name__
