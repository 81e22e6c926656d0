"""The provider kit: what every agent provider does the same way, done once.

- **Skeleton.** :class:`ProviderBase`: a provider built from its settings dataclass (directly, or
  by ``create`` from the settings table), the closed flag and the call's first checks.
- **Settings.** Each provider declares its ``[providers.NAME]`` table as a frozen dataclass; one
  function, :func:`check_settings`, checks a table against it: unknown keys, value types (one strict
  rule: ``true``/``false`` is a boolean and nothing else — never a number, and a number is never a
  boolean), list items, table values, bounds and choices, each error naming the key.
- **Probes.** :func:`dist_version`, :func:`program_version` and :func:`configured_program` (a
  ``bin`` setting that must name an executable file), for ``probe()`` without any secret.
- **Efforts.** :func:`map_effort`: a workflow effort through a provider's ``efforts`` table.
- **Failures.** One table per vendor (:class:`FailureTable`) from the vendor's error kinds to ours
  (:data:`FailureKind`); :func:`failure_outcome` turns a kind into the one outcome the engine knows
  for it: a pause for a login (:class:`~.base.ProviderAuthError`), a pause until a usage limit
  resets (:class:`~.base.ProviderUsageLimitError`), a ``provider_failed`` result (agent() resolves
  ``null``; rate limits and overloads retried with backoff) or an execution error. Foreign errors
  are translated once, at the provider's edge, into these.
- **Upstream messages.** :func:`upstream_message`: an HTTP error body reduced to its message.
- **SDKs and re-asks.** :func:`load_sdk` imports a vendor SDK (an optional extra) or says how to
  install it; :func:`ask_again` is the one rule for asking a reply without JSON again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.metadata
import os
import shutil
import subprocess
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, Literal, Self, TypeVar, Union

from .._nesting import loads
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentResult,
    ProviderAuthError,
    ProviderEvent,
    ProviderUsageLimitError,
    TokenUsage,
)
from .config import ProviderConfigError
from .policy import DEFAULT_POLICY, Policy
from .registry import Availability, ProviderStartError

__all__ = [
    "FailureKind",
    "FailureTable",
    "ProgramSettings",
    "ProviderBase",
    "ask_again",
    "at_least",
    "check_settings",
    "configured_program",
    "dist_version",
    "failure_error",
    "failure_outcome",
    "load_sdk",
    "map_effort",
    "more_than",
    "one_of",
    "probe_program",
    "program_version",
    "ready",
    "upstream_message",
]

# -- the skeleton ----------------------------------------------------------------------------------


S = TypeVar("S")


class ProviderBase(Generic[S]):
    """What every provider class shares. A subclass sets ``name``, ``settings_type`` (its settings
    dataclass, ``S``) and ``install_hint``; it is built from one ``S`` value (:attr:`settings`)
    plus the ``policy`` and the ``source`` of the settings, and sets ``_closed`` in ``aclose``."""

    name: str  # set by the class; an instance may give itself another (the fake's ``name=``)
    settings_type: ClassVar[type[Any]]
    install_hint: ClassVar[str]
    _closed: bool = False

    def __init__(
        self, settings: S | None = None, *, policy: Policy = DEFAULT_POLICY, source: str = "provider settings"
    ) -> None:
        """A provider for ``settings`` (default: every setting at its default) under ``policy``;
        ``source`` names where the settings come from in errors. Nothing starts here. Raises
        :class:`~.config.ProviderConfigError` naming ``source`` and the key when a value is out
        of its bounds or choices, or :meth:`check_more` or :meth:`setup` refuses it."""
        given: S = settings if settings is not None else self.settings_type()
        # the fields as they are (a shallow view: a table is checked, never copied or recursed into)
        values = {f.name: getattr(given, f.name) for f in dataclasses.fields(given)}  # type: ignore[arg-type]
        check_settings(type(given), values, provider=self.name, source=source)
        self.check_more(values, source)
        self.settings: S = given
        self.policy = policy
        self.source = source
        self.setup()

    def setup(self) -> None:
        """The provider's own state, derived from :attr:`settings` and :attr:`policy`."""

    @classmethod
    def create(cls, settings: Mapping[str, Any], *, policy: Policy, source: str) -> Self:
        """A provider from its ``[providers.NAME]`` table (the provider's module docstring),
        checked by :func:`check_settings` and :meth:`check_more`. Raises
        :class:`~.config.ProviderConfigError` naming ``source`` and the key."""
        check_settings(cls.settings_type, settings, provider=cls.name, source=source)
        return cls(cls.settings_type(**settings), policy=policy, source=source)

    @classmethod
    def check_more(cls, settings: Mapping[str, Any], source: str) -> None:
        """What the settings dataclass cannot say (a required key): raise
        :class:`~.config.ProviderConfigError`. Nothing by default."""

    def begin(self, context: AgentContext) -> None:
        """A call's first checks: :class:`asyncio.CancelledError` when its signal already fired,
        :class:`~.base.AgentExecutionError` when the provider is closed."""
        if context.signal.cancelled:
            raise asyncio.CancelledError(context.signal.reason)
        if self._closed:
            raise AgentExecutionError(f"the {self.name} provider is closed; build a new one for more calls")


@dataclass(frozen=True)
class ProgramSettings:
    """The settings of every provider that runs an agent program: ``bin`` (the program; default
    the one its SDK bundles), ``model`` (the default model) and ``env`` (more environment names the
    program may see besides its own credentials)."""

    bin: str | None = None
    model: str | None = None
    env: list[str] = dataclasses.field(default_factory=list)


def load_sdk(module: str, *, package: str, install: str) -> types.ModuleType:
    """The vendor SDK ``module`` (an optional extra, imported only when a call needs it). Raises
    :class:`~.registry.ProviderStartError` naming the ``package`` and the ``install`` command."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderStartError(
            f"the {package} SDK does not import ({exc}); install it with {install}"
        ) from exc


async def ask_again(
    context: AgentContext, *, backend: str, problem: str | None, asks: int, retries: int
) -> bool:
    """Whether a reply without a JSON value is asked for again: not once ``asks`` (made so far)
    reached ``retries``; else a ``progress`` event says so (``data: {"reask": n}``)."""
    if asks >= retries:
        return False
    await context.emit(
        ProviderEvent(
            kind="progress",
            text=f"{backend} replied without JSON ({problem}); asking again ({asks + 1} of {retries})",
            data={"reask": asks + 1},
        )
    )
    return True


def ready(
    *, version: str | None, location: str, login: tuple[bool | None, str | None, str | None], install: str
) -> Availability:
    """The availability of an installed provider: its ``version`` and ``location``, and the
    ``login`` it seems to have as ``(logged_in, what was seen, problem)``."""
    logged_in, seen, problem = login
    return Availability(
        True,
        version=version,
        location=location,
        logged_in=logged_in,
        login=seen,
        problem=problem,
        install=install,
    )


# -- settings --------------------------------------------------------------------------------------


def at_least(least: float) -> dict[str, Any]:
    """Field metadata for a settings dataclass: the value is ``least`` or more, e.g.
    ``max_sessions: int = field(default=8, metadata=at_least(1))``."""
    return {"least": least}


def more_than(above: float) -> dict[str, Any]:
    """Field metadata for a settings dataclass: the value is more than ``above`` (a timeout:
    ``more_than(0)``)."""
    return {"above": above}


def one_of(choices: Sequence[str]) -> dict[str, Any]:
    """Field metadata for a settings dataclass: the string value (or, for a table, each of its
    values) is one of ``choices``."""
    return {"choices": tuple(choices)}


def check_settings(spec: type[Any], settings: Mapping[str, Any], *, provider: str, source: str) -> None:
    """Check ``settings`` (a ``[providers.PROVIDER]`` table, or a constructor's keyword values)
    against the settings dataclass ``spec``: every key a field of it, every value of the field's
    type, within its bounds and choices.

    Types come from the field annotations: ``str``; ``int`` (not a boolean); ``float`` (an integer
    or a float, not a boolean); ``bool`` (``true`` or ``false`` only); ``list[str]`` (a list or
    tuple of non-empty strings); ``dict[str, T]`` (a table whose values are ``T``; ``Any`` takes
    every value); ``X | None`` (``X``, or ``None`` for "not set"). Bounds and choices come from
    the field metadata :func:`at_least`, :func:`more_than` and :func:`one_of`.

    Raises :class:`~.config.ProviderConfigError` naming ``source`` and ``providers.PROVIDER.KEY``.
    """
    fields = {f.name: f for f in dataclasses.fields(spec)}
    hints = typing.get_type_hints(spec)
    for key, value in settings.items():
        where = f"providers.{provider}.{key}"
        found = fields.get(key)
        if found is None:
            raise ProviderConfigError(source, where, f"unknown setting; expected one of {', '.join(fields)}")
        _check_value(hints[key], found.metadata, value, where, source)


def _check_value(hint: Any, metadata: Mapping[str, Any], value: Any, where: str, source: str) -> None:
    """Raise :class:`~.config.ProviderConfigError` at ``where`` when ``value`` does not fit; a
    table's values are checked one by one, at ``where.NAME``."""
    if typing.get_origin(hint) in (dict, Mapping) and isinstance(value, Mapping):
        _, inner = typing.get_args(hint)
        for name, item in value.items():
            _check_value(inner, metadata, item, f"{where}.{name}", source)
        return
    problem = _type_problem(hint, value) or _bound_problem(metadata, value)
    if problem is not None:
        raise ProviderConfigError(source, where, problem)


def _type_problem(hint: Any, value: Any) -> str | None:
    """Why ``value`` is not of the annotation ``hint`` (None when it is)."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        problems = [_type_problem(a, value) for a in options]
        if any(p is None for p in problems):
            return None
        return problems[0] if len(problems) == 1 else f"must be {' or '.join(_name(a) for a in options)}"
    if hint is Any:
        return None
    if hint is bool:
        return None if isinstance(value, bool) else "must be a boolean (true or false)"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "must be a number"
    if hint is str:
        return None if isinstance(value, str) else "must be a string"
    if origin in (list, tuple, Sequence):
        if isinstance(value, str) or not isinstance(value, list | tuple):
            return "must be a list of non-empty strings"
        if not all(isinstance(item, str) and item for item in value):
            return "must be a list of non-empty strings"
        return None
    if origin in (dict, Mapping):
        # a table's values are checked by _check_value; a table that is one option of a union is
        # taken as a table of its values' type unchecked
        return None if isinstance(value, Mapping) else "must be a table"
    raise TypeError(f"settings annotation {hint!r} is not one check_settings knows")


def _name(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) in (dict, Mapping):
        return "table"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(hint, "any") if hint is not Any else "any"


def _bound_problem(metadata: Mapping[str, Any], value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        return f"must be one of {', '.join(choices)}, got {value!r}"
    least, above = metadata.get("least"), metadata.get("above")
    if least is not None and value < least:
        return f"must be at least {least:g}, got {value!r}"
    if above is not None and value <= above:
        return f"must be more than {above:g}, got {value!r}"
    return None


# -- probes ----------------------------------------------------------------------------------------


def dist_version(dist: str) -> str | None:
    """The installed version of the distribution ``dist``, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def program_version(path: str, word: Literal["first", "last"] = "last") -> str | None:
    """The ``first`` or ``last`` word ``path --version`` prints (10 s at most), or ``None`` when it
    prints no such word holding a digit or exits with a failure status (a program that does not
    know ``--version`` answers something else, which is no version).

    Asked once per executable file and process: the answer is kept for the file's path, size and
    modification time, so probing a provider again (every run routes through a probe, and building
    it probes once more) starts no new process until the program is replaced."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, word, st.st_size, st.st_mtime_ns)
    if key in _VERSIONS:
        return _VERSIONS[key]
    try:
        done = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    words = done.stdout.strip().split()
    found = (words[0] if word == "first" else words[-1]) if words and done.returncode == 0 else None
    version = found if found is not None and any(c.isdigit() for c in found) else None
    _VERSIONS[key] = version
    return version


_VERSIONS: dict[tuple[str, str, int, int], str | None] = {}
""":func:`program_version`'s answers by (path, word, size, modification time in ns)."""


def probe_program(
    binary: str, word: Literal["first", "last"] = "last"
) -> tuple[str, str | None] | Availability:
    """A ``bin`` setting probed: ``(path, version)`` (the ``word`` of ``--version``), or the
    unavailability that says it is not an executable file."""
    path, problem = configured_program(binary)
    if path is None:
        return Availability(False, location=binary, problem=problem)
    return path, program_version(path, word)


def configured_program(binary: str) -> tuple[str | None, str | None]:
    """``(path, problem)`` for a ``bin`` setting: the executable it names (a path, or a name on
    ``PATH``), or ``None`` and why not (``"bin '…' is not an executable file"``)."""
    path = shutil.which(binary) or binary
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return None, f"bin {binary!r} is not an executable file"
    return path, None


# -- efforts ---------------------------------------------------------------------------------------


def map_effort(
    asked: str | None, *, table: Mapping[str, str], known: Sequence[str], default: str | None
) -> str | None:
    """The backend effort for the workflow's ``asked`` effort: its entry in the ``efforts``
    ``table``; else ``asked`` itself when the backend ``known``\\ s it; else the ``default``
    (``None``: the backend's own). Never raises: an effort nobody maps is not guessed."""
    if asked is None:
        return default
    return table.get(asked, asked if asked in known else default)


# -- failures --------------------------------------------------------------------------------------

FailureKind = Literal["auth", "usage_limit", "rate_limit", "overloaded", "api", "execution"]
"""What a vendor's failure means here: ``auth`` (a login is missing or expired: the run pauses),
``usage_limit`` (a plan's usage or a key's quota is spent: the run pauses until it resets),
``rate_limit`` and ``overloaded`` (load: ``provider_failed``, retried by the engine with backoff),
``api`` (an API or transport failure after the backend's own retries: ``provider_failed``, agent()
resolves ``null``), ``execution`` (anything else: agent() rejects)."""


@dataclass(frozen=True)
class FailureTable:
    """One vendor's failure kinds as ours: ``kinds`` maps the vendor's error kind (codexErrorInfo,
    Claude's ``AssistantMessage.error``, …) to a :data:`FailureKind`; ``statuses`` maps an HTTP
    status; an unknown kind with no known status is ``default``."""

    vendor: str
    kinds: Mapping[str, FailureKind]
    statuses: Mapping[int, FailureKind] = dataclasses.field(default_factory=dict)
    default: FailureKind = "execution"

    def kind(self, *vendor_kinds: str | None, status: int | None = None) -> FailureKind:
        """Our kind for what the vendor said: the first of ``vendor_kinds`` the table knows, else
        the HTTP ``status`` (any 5xx not in ``statuses`` is ``api``), else ``default``. A login
        problem wins over everything: ``auth`` from a kind or from the status."""
        known = [self.kinds[k] for k in vendor_kinds if k is not None and k in self.kinds]
        by_status: FailureKind | None = None
        if status is not None:
            by_status = self.statuses.get(status, "api" if status >= 500 else None)
        if "auth" in known or by_status == "auth":
            return "auth"
        return known[0] if known else by_status or self.default


HTTP_STATUSES: Final[Mapping[int, FailureKind]] = {
    401: "auth",
    429: "rate_limit",
    503: "overloaded",
    529: "overloaded",
}
"""The HTTP statuses every vendor shares: 401 a login, 429 a rate limit, 503/529 an overload."""


def failure_outcome(
    kind: FailureKind,
    *,
    backend: str,
    detail: str,
    login_hint: str | None = None,
    resets_at: str | None = None,
    usage: TokenUsage | None = None,
    session: str | None = None,
    retry_after_s: float | None = None,
) -> AgentResult:
    """The engine's outcome for a failure of ``kind`` (:data:`FailureKind`): a ``provider_failed``
    :class:`~.base.AgentResult` (``failure`` set for ``rate_limit`` and ``overloaded``), or raises
    :class:`~.base.ProviderAuthError` (``auth``), :class:`~.base.ProviderUsageLimitError`
    (``usage_limit``) or :class:`~.base.AgentExecutionError` (``execution``: ``"BACKEND: detail"``)."""
    if kind in ("auth", "usage_limit", "execution"):
        raise failure_error(kind, backend=backend, detail=detail, login_hint=login_hint, resets_at=resets_at)
    return AgentResult(
        outcome="provider_failed",
        message=detail,
        usage=usage or TokenUsage(),
        session=session,
        failure=kind if kind in ("rate_limit", "overloaded") else None,
        retry_after_s=retry_after_s,
    )


def failure_error(
    kind: Literal["auth", "usage_limit", "execution"],
    *,
    backend: str,
    detail: str,
    login_hint: str | None = None,
    resets_at: str | None = None,
) -> AgentExecutionError:
    """The exception for a failure that does not resolve ``null``: :class:`~.base.ProviderAuthError`
    (``auth``), :class:`~.base.ProviderUsageLimitError` (``usage_limit``) or
    :class:`~.base.AgentExecutionError` (``execution``, ``"BACKEND: detail"``); to raise ``from``
    the foreign error."""
    if kind == "auth":
        return ProviderAuthError(backend, detail, login_hint=login_hint)
    if kind == "usage_limit":
        return ProviderUsageLimitError(backend, detail, resets_at=resets_at)
    return AgentExecutionError(f"{backend}: {detail}")


def upstream_message(message: str) -> str:
    """``message``, or when it is an upstream JSON error body (``{"error": {"message": …}}``)
    just that inner message."""
    try:
        body = loads(message)
    except (ValueError, TypeError):
        return message
    inner = body.get("error") if isinstance(body, dict) else None
    text = inner.get("message") if isinstance(inner, dict) else None
    return text if isinstance(text, str) and text else message
