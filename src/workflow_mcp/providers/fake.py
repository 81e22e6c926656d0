"""The deterministic fake provider: scripted answers for tests, conformance cases and dry runs.

The script format is the conformance README's "The fake provider script"::

    {"rules": [{"match": {...}, "respond": {...}}, ...], "default": {...respond...}}

The first rule whose ``match`` holds answers; with no matching rule the ``default`` answers; with
neither, the call behaves as ``{"synthesize": true}``.

``match`` (every key optional; all given keys must hold):
    ``label``      glob over the whole label, case-sensitive; ``*`` any run, ``?`` one character
                   (no other wildcard: ``[`` is literal).
    ``prompt``     Python regular expression, searched in the prompt (each match is time-limited,
                   see :mod:`workflow_mcp.patterns`).
    ``instructions``  Python regular expression, searched in the agent definition's instructions
                   (a call without instructions never matches).
    ``phase``, ``model``, ``agentType``  exact string; ``null`` matches a call without one. ``model``
                   is the normalized name (``haiku``, ``sonnet``, ``opus`` for Claude's aliases);
                   ``agentType`` the agent definition the call resolved to.

``respond`` — at most one answer key (``text``, ``echo``, ``result``, ``fail``, ``synthesize``):
    ``text``       plain text; ``{prompt}``, ``{label}``, ``{phase}``, ``{model}``, ``{effort}``,
                   ``{agentType}``, ``{isolation}``, ``{instructions}`` become the call's values ("" when
                   absent); ``{tools}`` the agent's tool names joined by ``,`` (``*`` for the
                   provider's defaults) and ``{disallowedTools}`` the names it may not use. Any
                   other brace is literal; substituted values are not re-substituted.
    ``echo: true`` the text is the prompt.
    ``result``     any JSON value. On a schema call it is the structured output (the engine
                   validates it like any provider output). On a call without a schema it becomes
                   the text: a string as is, anything else as compact JSON (``JSON.stringify``).
    ``fail``       ``provider`` → outcome ``provider_failed``; ``skip`` → outcome ``skipped``;
                   ``error`` → raises :class:`AgentExecutionError`; ``no_structured_output`` →
                   ``completed`` with text but no structured output; ``usage_limit`` → raises
                   :class:`~workflow_mcp.providers.base.ProviderUsageLimitError`, so the run pauses with
                   reason ``usage_limit`` exactly as it does for a real backend's spent quota.
                   ``message`` gives the text (for ``usage_limit``: the backend's detail).
    ``synthesize: true``  text calls echo the prompt; schema calls get
                   :func:`~workflow_mcp.providers._synthesize.synthesize_instance` of the schema.
    No answer key  same as ``synthesize: true`` (so ``{"delayMs": 50}`` alone is valid).
  and, alongside the answer:
    ``message``    text for ``fail`` (only valid with ``fail``).
    ``resetsAt``   with ``fail: usage_limit`` only: when the limit resets, an ISO 8601 time with a zone
                   (``2026-01-01T05:00:00Z``), reported as the pause's ``resetsAt`` (UTC, whole seconds).
                   It simulates a spent limit: once the provider's clock reaches it, the step no longer
                   answers and the call goes on to the next rule that matches (then ``default``, then
                   synthesis), as a real backend answers again after its reset. The counter of a
                   ``sequence`` is not advanced by a step passed over this way.
    ``retryAfterMs``  with ``fail: usage_limit`` only (not with ``resetsAt``): the backend's
                   ``Retry-After`` hint, a non-negative number of milliseconds; the pause's ``resetsAt``
                   is the provider's clock at the call plus this much. Every call the step answers is
                   refused (the hint is relative, so it never expires).
    ``delayMs``    wall-clock delay before answering, a non-negative number of milliseconds;
                   firing ``context.signal`` ends it at once with :class:`asyncio.CancelledError`.
    ``tokens``     ``{"input": n, "output": m}`` (also ``cacheRead``, ``cacheWrite``), non-negative
                   integers, reported as the call's :class:`TokenUsage` (whatever the outcome).
    ``sequence``   a non-empty list of respond objects (no nested ``sequence``) used by successive
                   calls that reach this rule; the last one repeats. It cannot be combined with
                   other keys. The counter is per rule and counts ``execute()`` calls, so a schema
                   re-ask (``request.attempt > 1``) takes the next step.

Decisions (the README leaves these open):
- A structured ``result`` has ``text=None``; only text answers emit an ``output.delta`` event, one
  per call, and only when the text is non-empty.
- ``text`` or ``echo`` on a schema call returns text without structured output, like a model that
  ignored the schema; the engine's re-ask/reject rules apply.
- A schema the synthesizer cannot satisfy raises :class:`AgentExecutionError` naming the schema.
- A call whose signal has already fired raises :class:`asyncio.CancelledError` before answering.
- Default messages: ``provider`` → "fake provider failure", ``skip`` → "skipped by the user",
  ``error`` → "fake execution error", ``no_structured_output`` → text "", ``usage_limit`` → no detail.
- The provider's clock is ``time.time`` (seconds since the epoch) unless ``clock`` is given, so a test
  can move time past a ``resetsAt`` without waiting for it.
- Unknown keys, wrong types and bad regular expressions are refused when the script is loaded,
  with :class:`~workflow_mcp.errors.InvalidInputError` naming the path, e.g.
  ``rules[2].respond.fail: must be one of provider, skip, error, no_structured_output``.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import math
import os
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .._nesting import MAX_VALUE_DEPTH
from ..errors import InvalidInputError
from ..patterns import BoundedPattern, compile_bounded
from ._kit import ProviderBase
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    ProviderCapabilities,
    ProviderEvent,
    ProviderUsageLimitError,
    TokenUsage,
)
from .policy import DEFAULT_POLICY, Policy

__all__ = ["FakeProvider", "FakeSettings"]

_TOP_KEYS: Final = ("rules", "default")
_RULE_KEYS: Final = ("match", "respond")
_MATCH_KEYS: Final = ("label", "prompt", "instructions", "phase", "model", "agentType")
_RESPOND_KEYS: Final = (
    "text",
    "echo",
    "result",
    "fail",
    "message",
    "delayMs",
    "tokens",
    "sequence",
    "synthesize",
    "resetsAt",
    "retryAfterMs",
)
_ANSWER_KEYS: Final = ("text", "echo", "result", "fail", "synthesize")
_FAIL_KINDS: Final = ("provider", "skip", "error", "no_structured_output", "usage_limit")
_LIMIT_KEYS: Final = ("resetsAt", "retryAfterMs")  # only with fail: usage_limit
_TOKEN_KEYS: Final = {
    "input": "input",
    "output": "output",
    "cacheRead": "cache_read",
    "cacheWrite": "cache_write",
}
# match key -> AgentRequest attribute, for the exact-match keys
_EXACT_KEYS: Final = {"phase": "phase", "model": "model", "agentType": "agent_type"}
_PLACEHOLDER: Final = re.compile(
    r"\{(prompt|label|phase|model|effort|agentType|isolation|instructions|tools|disallowedTools)\}"
)
_PLACEHOLDER_ATTRS: Final = {
    "prompt": "prompt",
    "label": "label",
    "phase": "phase",
    "model": "model",
    "effort": "effort",
    "agentType": "agent_type",
    "isolation": "isolation",
    "instructions": "instructions",
    "tools": "tools",
    "disallowedTools": "disallowed_tools",
}


@dataclass(frozen=True)
class _Respond:
    """One parsed respond object (never a ``sequence``)."""

    text: str | None = None
    echo: bool = False
    has_result: bool = False
    result: Any = None
    fail: str | None = None
    message: str | None = None
    delay_ms: float = 0.0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    resets_at: float | None = None  # fail: usage_limit — epoch seconds the simulated limit resets at
    retry_after_ms: float | None = None  # fail: usage_limit — a relative Retry-After hint
    # A text answer without placeholders is the same every call: its result and delta, built once
    # (frozen values; the fake's cost per call is part of the engine's measured cost per call).
    reply: AgentResult | None = None
    delta: ProviderEvent | None = None

    def expired(self, now: float) -> bool:
        """A simulated usage limit whose reset time ``now`` (epoch seconds) has reached."""
        return self.fail == "usage_limit" and self.resets_at is not None and now >= self.resets_at


@dataclass(frozen=True)
class _Match:
    label: BoundedPattern | None = None
    prompt: BoundedPattern | None = None
    instructions: BoundedPattern | None = None
    exact: tuple[tuple[str, str | None], ...] = ()

    def holds(self, request: AgentRequest) -> bool:
        if self.label is not None and not self.label.fullmatch(request.label):
            return False
        if self.prompt is not None and not self.prompt.search(request.prompt):
            return False
        if self.instructions is not None and (
            request.instructions is None or not self.instructions.search(request.instructions)
        ):
            return False
        return all(getattr(request, attr) == expected for attr, expected in self.exact)


@dataclass(frozen=True)
class _Rule:
    match: _Match
    steps: tuple[_Respond, ...]


@dataclass(frozen=True)
class FakeSettings:
    """The ``[providers.fake]`` table: ``script``, a fake script (the module docstring's format) as
    an inline table, or the path of a UTF-8 JSON file holding one. ``None`` (the default) means no
    rules: every call is synthesized."""

    script: str | Mapping[str, Any] | None = None


class FakeProvider(ProviderBase[FakeSettings]):
    """A scripted, deterministic :class:`~workflow_mcp.providers.AgentProvider`.

    ``script`` follows the conformance README's fake provider format (see the module docstring);
    ``None`` means no rules, so every call is synthesized; a :class:`FakeSettings` value (how the
    provider kit's ``create`` builds one from a ``[providers.fake]`` table) may name a script file
    instead. Responses given to :meth:`enqueue` are used first, one per call, in order. Every
    ``execute()`` request is appended to :attr:`calls`. ``name`` is the name its errors and usage
    limits give.

    Raises :class:`~workflow_mcp.errors.InvalidInputError` naming the offending path when the
    script is malformed. ``clock`` (seconds since the epoch; default ``time.time``) decides when a
    scripted usage limit resets and what ``retryAfterMs`` resolves to.
    """

    name = "fake"
    settings_type = FakeSettings
    install_hint = "nothing to install: the fake provider ships with workflow-mcp"
    capabilities: Final = ProviderCapabilities(structured_output=True, streaming=True, cancellation=True)

    def __init__(
        self,
        script: Mapping[str, Any] | FakeSettings | None = None,
        *,
        name: str = "fake",
        clock: Callable[[], float] | None = None,
        policy: Policy = DEFAULT_POLICY,
        source: str = "fake script",
    ) -> None:
        self.name = name
        self._clock = clock or time.time
        if isinstance(script, FakeSettings):
            settings = script
        elif script is None or isinstance(script, Mapping):
            settings = FakeSettings(script=None if script is None else dict(script))
        else:  # never read as a path: only a FakeSettings value names a file
            raise _parse_error(script, "fake script")
        super().__init__(settings, policy=policy, source=source)

    def setup(self) -> None:
        """Read and check the script (:class:`~workflow_mcp.errors.InvalidInputError` naming the
        offending path; a file's errors start with its path)."""
        given = self.settings.script
        if isinstance(given, str):
            where = f"fake script {given}"
            script: Any = _read_script(given, where)
            self._rules, self._default = _parse_script(script, where)
        else:
            self._rules, self._default = _parse_script({} if given is None else given, "fake script")
            script = copy.deepcopy(dict(given)) if given is not None else {}
        #: The script as given (JSON), kept so a resumed run can be answered the same way.
        self.script: dict[str, Any] = script
        self.calls: list[AgentRequest] = []
        # per-rule count of calls answered, for `sequence`; the default's key is -1
        self._counters: dict[int, int] = {}
        self._queue: deque[_Respond] = deque()

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, name: str = "fake", clock: Callable[[], float] | None = None
    ) -> FakeProvider:
        """Load a script from a UTF-8 JSON file (the CLI's ``--fake-script``).

        Raises :class:`~workflow_mcp.errors.InvalidInputError` when the file cannot be read, is
        not JSON, or breaks the script format; the message starts with the file's path.
        """
        return cls(FakeSettings(script=os.fspath(path)), name=name, clock=clock)

    def enqueue(self, respond: Mapping[str, Any]) -> None:
        """Queue one respond object for the next call, ahead of every rule (first in, first out).

        ``respond`` uses the script's respond format without ``sequence`` (enqueue each step).
        Raises :class:`~workflow_mcp.errors.InvalidInputError` when it is malformed.
        """
        self._queue.append(_parse_respond(respond, "respond", "enqueue", allow_sequence=False)[0])

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Answer ``request`` from the queue or the script.

        Returns an :class:`AgentResult` (outcomes ``completed``, ``provider_failed``, ``skipped``);
        raises :class:`AgentExecutionError` for ``fail: error`` or an unsatisfiable schema, and
        :class:`asyncio.CancelledError` when ``context.signal`` fires before the answer.
        """
        self.calls.append(request)
        self.begin(context)
        respond = self._choose(request)
        if respond.delay_ms > 0:
            await _delay(respond.delay_ms / 1000, context)
        if respond.fail == "usage_limit":
            raise ProviderUsageLimitError(
                self.name, respond.message or "", resets_at=self._resets_at(respond)
            )
        return await _answer(respond, request, context)

    def _resets_at(self, respond: _Respond) -> str | None:
        """The pause's ``resetsAt`` (ISO 8601 UTC, whole seconds) for a ``usage_limit`` step."""
        if respond.resets_at is not None:
            moment = respond.resets_at
        elif respond.retry_after_ms is not None:
            moment = self._clock() + respond.retry_after_ms / 1000
        else:
            return None
        return _iso(moment)

    async def aclose(self) -> None:
        """Refuse later calls (idempotent). The fake holds no process or connection to release."""
        self._closed = True

    def _choose(self, request: AgentRequest) -> _Respond:
        now = self._clock()
        while self._queue:
            queued = self._queue.popleft()
            if not queued.expired(now):
                return queued
        for index, rule in enumerate(self._rules):
            if rule.match.holds(request):
                step = self._step(index, rule.steps, now)
                if step is not None:
                    return step
        if self._default is not None:
            step = self._step(-1, self._default, now)
            if step is not None:
                return step
        return _Respond()

    def _step(self, key: int, steps: tuple[_Respond, ...], now: float) -> _Respond | None:
        """The rule's current step, or ``None`` when it is a usage limit that has reset by ``now``
        (the counter then stays: the call is answered elsewhere)."""
        count = self._counters.get(key, 0)
        step = steps[min(count, len(steps) - 1)]
        if step.expired(now):
            return None
        self._counters[key] = count + 1
        return step


def _read_script(path: str, where: str) -> Any:
    """The JSON value in the file at ``path``; :class:`~workflow_mcp.errors.InvalidInputError`
    starting with ``where`` when it cannot be read or is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"{where}: cannot read the file: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{where}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError:
        raise InvalidInputError(
            f"{where}: nested too deeply to read; a result may nest at most {_MAX_DEPTH} levels"
        ) from None


def _iso(moment: float) -> str:
    """Epoch seconds as ISO 8601 UTC with whole seconds: ``2026-01-01T05:00:00Z``."""
    stamp = datetime.datetime.fromtimestamp(math.floor(moment), tz=datetime.UTC)
    return stamp.isoformat().replace("+00:00", "Z")


async def _delay(seconds: float, context: AgentContext) -> None:
    """Sleep ``seconds`` unless the signal fires first, then raise ``CancelledError``."""
    try:
        await asyncio.wait_for(context.signal.wait(), timeout=seconds)
    except TimeoutError:
        return
    raise asyncio.CancelledError(context.signal.reason)


async def _answer(respond: _Respond, request: AgentRequest, context: AgentContext) -> AgentResult:
    if respond.reply is not None:
        if respond.delta is not None:
            await context.emit(respond.delta)
        return respond.reply
    usage = respond.tokens
    if respond.fail == "error":
        raise AgentExecutionError(respond.message or "fake execution error")
    if respond.fail == "provider":
        return AgentResult(
            outcome="provider_failed", message=respond.message or "fake provider failure", usage=usage
        )
    if respond.fail == "skip":
        return AgentResult(outcome="skipped", message=respond.message or "skipped by the user", usage=usage)

    text: str
    if respond.fail == "no_structured_output":
        text = respond.message or ""
    elif respond.has_result:
        value = copy.deepcopy(respond.result)
        if request.schema is not None:
            return AgentResult(structured=value, has_structured=True, usage=usage)
        text = (
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        )
    elif respond.text is not None:
        text = _render(respond.text, request)
    elif respond.echo or request.schema is None:
        text = request.prompt
    else:
        try:
            from ._synthesize import synthesize_instance  # imports jsonschema: only when needed

            value = synthesize_instance(request.schema)
        except InvalidInputError as exc:
            raise AgentExecutionError(f"fake provider: {exc}") from exc
        return AgentResult(structured=value, has_structured=True, usage=usage)

    if text:
        await context.emit(ProviderEvent(kind="output.delta", text=text))
    return AgentResult(text=text, usage=usage)


def _render(template: str, request: AgentRequest) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = getattr(request, _PLACEHOLDER_ATTRS[name])
        if name == "tools":
            return "*" if found is None else ",".join(found)
        if name == "disallowedTools":
            return ",".join(found)
        return "" if found is None else str(found)

    return _PLACEHOLDER.sub(value, template)


# -- script validation -------------------------------------------------------------------------


def _invalid(where: str, path: str, problem: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {path}: {problem}")


def _parse_error(script: Any, where: str) -> InvalidInputError:
    return InvalidInputError(
        f"{where}: must be a JSON object with `rules` and/or `default`, got {_kind(script)}"
    )


def _parse_script(script: Any, where: str) -> tuple[list[_Rule], tuple[_Respond, ...] | None]:
    if not isinstance(script, Mapping):
        raise _parse_error(script, where)
    _check_keys(script, _TOP_KEYS, "", where)
    rules: list[_Rule] = []
    raw_rules = script.get("rules", [])
    if not _is_list(raw_rules):
        raise _invalid(where, "rules", f"must be a list of rules, got {_kind(raw_rules)}")
    for index, raw in enumerate(raw_rules):
        path = f"rules[{index}]"
        if not isinstance(raw, Mapping):
            raise _invalid(where, path, f"must be an object with `match` and `respond`, got {_kind(raw)}")
        _check_keys(raw, _RULE_KEYS, path, where)
        if "respond" not in raw:
            raise _invalid(where, f"{path}.respond", "is required")
        match = _parse_match(raw.get("match", {}), f"{path}.match", where)
        steps = _parse_respond(raw["respond"], f"{path}.respond", where, allow_sequence=True)
        rules.append(_Rule(match, steps))
    default = None
    if "default" in script:
        default = _parse_respond(script["default"], "default", where, allow_sequence=True)
    return rules, default


def _parse_match(raw: Any, path: str, where: str) -> _Match:
    if not isinstance(raw, Mapping):
        raise _invalid(where, path, f"must be an object, got {_kind(raw)}")
    _check_keys(raw, _MATCH_KEYS, path, where)
    label = prompt = instructions = None
    if "label" in raw:
        if not isinstance(raw["label"], str):
            raise _invalid(where, f"{path}.label", f"must be a string (a glob), got {_kind(raw['label'])}")
        label = _glob(raw["label"])
    if "prompt" in raw:
        if not isinstance(raw["prompt"], str):
            raise _invalid(where, f"{path}.prompt", f"must be a string (a regex), got {_kind(raw['prompt'])}")
        try:
            prompt = compile_bounded(raw["prompt"])
        except ValueError as exc:
            raise _invalid(where, f"{path}.prompt", f"invalid regular expression: {exc}") from exc
    if "instructions" in raw:
        if not isinstance(raw["instructions"], str):
            raise _invalid(
                where, f"{path}.instructions", f"must be a string (a regex), got {_kind(raw['instructions'])}"
            )
        try:
            instructions = compile_bounded(raw["instructions"])
        except ValueError as exc:
            raise _invalid(where, f"{path}.instructions", f"invalid regular expression: {exc}") from exc
    exact: list[tuple[str, str | None]] = []
    for key, attr in _EXACT_KEYS.items():
        if key in raw:
            if raw[key] is not None and not isinstance(raw[key], str):
                raise _invalid(where, f"{path}.{key}", f"must be a string or null, got {_kind(raw[key])}")
            exact.append((attr, raw[key]))
    return _Match(label=label, prompt=prompt, instructions=instructions, exact=tuple(exact))


def _parse_respond(raw: Any, path: str, where: str, *, allow_sequence: bool) -> tuple[_Respond, ...]:
    if not isinstance(raw, Mapping):
        raise _invalid(where, path, f"must be an object, got {_kind(raw)}")
    _check_keys(raw, _RESPOND_KEYS, path, where)
    if "sequence" in raw:
        if not allow_sequence:
            raise _invalid(where, f"{path}.sequence", "is not allowed here (no nested sequences)")
        others = sorted(k for k in raw if k != "sequence")
        if others:
            raise _invalid(
                where,
                path,
                f"`sequence` cannot be combined with {', '.join(others)}; put them inside each step",
            )
        steps = raw["sequence"]
        if not _is_list(steps) or not steps:
            raise _invalid(where, f"{path}.sequence", "must be a non-empty list of respond objects")
        return tuple(
            _parse_respond(step, f"{path}.sequence[{i}]", where, allow_sequence=False)[0]
            for i, step in enumerate(steps)
        )

    answers = [k for k in _ANSWER_KEYS if k in raw]
    if len(answers) > 1:
        raise _invalid(
            where,
            path,
            f"{' and '.join(answers)} are mutually exclusive; give one of {', '.join(_ANSWER_KEYS)}",
        )
    text = raw.get("text")
    if "text" in raw and not isinstance(text, str):
        raise _invalid(where, f"{path}.text", f"must be a string, got {_kind(text)}")
    for flag in ("echo", "synthesize"):
        if flag in raw and raw[flag] is not True:
            raise _invalid(where, f"{path}.{flag}", f"must be true, got {_kind(raw[flag])}")
    fail = raw.get("fail")
    if "fail" in raw and fail not in _FAIL_KINDS:
        raise _invalid(where, f"{path}.fail", f"must be one of {', '.join(_FAIL_KINDS)}")
    message = raw.get("message")
    if "message" in raw:
        if fail is None:
            raise _invalid(where, f"{path}.message", "is only valid with `fail`")
        if not isinstance(message, str):
            raise _invalid(where, f"{path}.message", f"must be a string, got {_kind(message)}")
    resets_at, retry_after_ms = _parse_limit(raw, fail, path, where)
    delay = raw.get("delayMs", 0)
    if not _is_number(delay) or delay < 0 or not math.isfinite(delay):
        raise _invalid(where, f"{path}.delayMs", "must be a non-negative number of milliseconds")
    tokens = _parse_tokens(raw["tokens"], f"{path}.tokens", where) if "tokens" in raw else TokenUsage()
    if "result" in raw:
        _check_json(raw["result"], f"{path}.result", where)
    reply = delta = None
    if text is not None and fail is None and not _PLACEHOLDER.search(text):
        reply = AgentResult(text=text, usage=tokens)
        delta = ProviderEvent(kind="output.delta", text=text) if text else None
    return (
        _Respond(
            text=text,
            echo=raw.get("echo") is True,
            has_result="result" in raw,
            result=copy.deepcopy(raw.get("result")),
            fail=fail,
            message=message,
            delay_ms=float(delay),
            tokens=tokens,
            resets_at=resets_at,
            retry_after_ms=retry_after_ms,
            reply=reply,
            delta=delta,
        ),
    )


def _parse_limit(
    raw: Mapping[str, Any], fail: Any, path: str, where: str
) -> tuple[float | None, float | None]:
    """``resetsAt`` (as epoch seconds) and ``retryAfterMs`` of a ``fail: usage_limit`` step."""
    given = [key for key in _LIMIT_KEYS if key in raw]
    if not given:
        return None, None
    if fail != "usage_limit":
        raise _invalid(where, f"{path}.{given[0]}", "is only valid with `fail: usage_limit`")
    if len(given) > 1:
        raise _invalid(where, path, "resetsAt and retryAfterMs are mutually exclusive; give one")
    if "retryAfterMs" in raw:
        hint = raw["retryAfterMs"]
        if not _is_number(hint) or hint < 0 or not math.isfinite(hint):
            raise _invalid(where, f"{path}.retryAfterMs", "must be a non-negative number of milliseconds")
        return None, float(hint)
    stamp = raw["resetsAt"]
    example = "an ISO 8601 time with a zone, e.g. 2026-01-01T05:00:00Z"
    if not isinstance(stamp, str):
        raise _invalid(where, f"{path}.resetsAt", f"must be {example}, got {_kind(stamp)}")
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        raise _invalid(where, f"{path}.resetsAt", f"must be {example}, got {stamp!r}") from None
    if moment.tzinfo is None:
        raise _invalid(where, f"{path}.resetsAt", f"must name its zone (Z or +HH:MM): {example}")
    return moment.timestamp(), None


def _parse_tokens(raw: Any, path: str, where: str) -> TokenUsage:
    if not isinstance(raw, Mapping):
        raise _invalid(where, path, f"must be an object like {{'input': n, 'output': m}}, got {_kind(raw)}")
    _check_keys(raw, tuple(_TOKEN_KEYS), path, where)
    counts: dict[str, int] = {}
    for key, attr in _TOKEN_KEYS.items():
        value = raw.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _invalid(where, f"{path}.{key}", "must be a non-negative integer")
        counts[attr] = value
    return TokenUsage(**counts)


def _check_keys(raw: Mapping[Any, Any], allowed: Sequence[str], path: str, where: str) -> None:
    for key in raw:
        if key not in allowed:
            at = f"{path}.{key}" if path else str(key)
            raise _invalid(where, at, f"unknown key; expected one of {', '.join(allowed)}")


_MAX_DEPTH: Final = MAX_VALUE_DEPTH
"""The deepest scripted ``result``: the most the engine accepts from any provider; deeper would fail
every call it answers."""


def _check_json(value: Any, path: str, where: str) -> None:
    """``value`` is plain JSON nested at most :data:`_MAX_DEPTH` levels. Iterative: a script is user
    input, and a deep one must be refused, not overflow Python's stack."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, at, depth = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _invalid(where, at, f"not a JSON value ({item!r})")
            continue
        if isinstance(item, Mapping) or _is_list(item):
            if depth >= _MAX_DEPTH:
                raise _invalid(where, at[:60] + "…", f"nested deeper than {_MAX_DEPTH} levels")
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise _invalid(where, at, f"object keys must be strings, got {_kind(key)}")
                    stack.append((child, f"{at}.{key}", depth + 1))
            else:
                stack.extend((child, f"{at}[{index}]", depth + 1) for index, child in enumerate(item))
            continue
        raise _invalid(where, at, f"not a JSON value ({_kind(item)})")


def _glob(pattern: str) -> BoundedPattern:
    """``*`` matches any run of characters, ``?`` exactly one; everything else is literal (matched
    under the untrusted-pattern time limit: ``*a*a*a*…b`` backtracks too)."""
    translated = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return compile_bounded(translated, dotall=True)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if _is_list(value):
        return "a list"
    return type(value).__name__
