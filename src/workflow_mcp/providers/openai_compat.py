"""The ``openai`` provider: any OpenAI-compatible endpoint (a local llama.cpp, vLLM or Ollama
server, or a hosted API) through the official ``openai`` Python SDK, for users without an agent
CLI. Install with ``pip install 'workflow-mcp[openai]'``.

A model, not an agent: it has no tools and touches no files, so sandbox and approvals have nothing
to govern (the policy still applies to every agent provider routed beside it). Each agent() call is
one request:

- **API.** Chat Completions by default (``api = "chat"``: ``POST {base_url}/chat/completions``);
  ``api = "responses"`` uses the Responses API (``POST {base_url}/responses``), whose response id
  becomes ``AgentResult.session`` and is continued (``previous_response_id``) by a request that
  names it.
- **Structured output.** ``response_format = {"type": "json_schema", "json_schema": {"name",
  "schema", "strict": true}}`` (Responses: ``text.format``) with the schema rewritten for strict
  mode by :func:`~.schema.to_strict`; the answer is read by :func:`~.schema.parse_answer` (a
  fenced answer is taken too) and projected back (synthetic nulls
  dropped, a wrapped top-level value unwrapped). ``strict = false`` sends the portable schema
  unchanged with ``strict: false`` (for servers without strict mode). A reply that is not JSON
  (servers that ignore ``response_format``) is asked again up to ``json_retries`` times, then
  returned with ``has_structured=False``. The engine validates the value and re-asks with its
  feedback, which continues the same conversation.
- **Images.** Image attachments are ``image_url`` content parts of the user message (``data:``
  URLs; Responses: ``input_image``) after its text. Whether the model sees them is the endpoint's
  business: a text-only model's refusal is its HTTP error.
- **Agent definitions.** An ``agentType``'s instructions are a system message after the
  ``system_prompt`` setting (Responses: joined into ``instructions``); its model and effort arrive as
  the request's. A model has no tools, so tool lists change nothing.
- **Usage.** ``prompt_tokens`` less cached → ``input``, ``completion_tokens`` → ``output`` (charged to
  the budget), ``cached_tokens`` → ``cache_read``.
- **Cancellation.** When ``context.signal`` fires, the request task is cancelled (the HTTP
  connection is closed) and the call ends with :class:`asyncio.CancelledError`.
- **Outcomes.** HTTP 401/403, or no API key for a remote endpoint →
  :class:`~.base.ProviderAuthError` (the run should pause for a login); a 429 whose code says the
  quota or usage is spent (``insufficient_quota``) → :class:`~.base.ProviderUsageLimitError` (the run
  pauses; a ``Retry-After`` gives the reset time); 5xx, 429, timeouts and connection failures after
  the SDK's own retries (``max_retries``) → ``provider_failed`` (429 as ``rate_limit`` and 503/529 as
  ``overloaded`` with their ``Retry-After``, which the engine retries with backoff); any
  other HTTP error (400 bad request, 404 unknown model …) → :class:`~.base.AgentExecutionError`.

Settings (``[providers.openai]``): ``model`` (required: the model the endpoint serves),
``base_url`` (default the SDK's: ``$OPENAI_BASE_URL`` or api.openai.com), ``api_key_env`` (the
environment variable holding the key, default ``OPENAI_API_KEY``; a loopback ``base_url`` needs
none), ``api`` (``chat`` | ``responses``), ``strict`` (default true), ``system_prompt``,
``efforts`` (table: workflow effort → ``reasoning_effort``; unmapped efforts are not sent),
``extra_body`` (table merged into each request body, e.g. Ollama's ``options``), ``backend`` (the
name in messages, default ``openai``), ``timeout_s`` (per request, default 600), ``max_retries``
(the SDK's, default 2), ``json_retries`` (default 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import urlparse

from .._nesting import NestingError
from ._kit import (
    FailureTable,
    ProviderBase,
    ask_again,
    at_least,
    dist_version,
    failure_outcome,
    load_sdk,
    more_than,
    one_of,
)
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    ProviderAuthError,
    ProviderCapabilities,
    TokenUsage,
)
from .config import ProviderConfigError
from .registry import Availability
from .schema import StrictSchema, parse_answer, to_strict

__all__ = ["OpenAIProvider", "OpenAISettings"]

INSTALL: Final = "pip install 'workflow-mcp[openai]'"
SCHEMA_NAME: Final = "agent_output"


@dataclass(frozen=True)
class OpenAISettings:
    """``[providers.openai]`` (module docstring), checked by :func:`~._kit.check_settings`."""

    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    api: str = field(default="chat", metadata=one_of(("chat", "responses")))
    strict: bool = True
    system_prompt: str | None = None
    efforts: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    timeout_s: float = field(default=600.0, metadata=more_than(0))
    max_retries: int = field(default=2, metadata=at_least(0))
    json_retries: int = field(default=1, metadata=at_least(0))


FAILURES: Final = FailureTable(
    "openai",
    kinds={
        "AuthenticationError": "auth",
        "PermissionDeniedError": "auth",
        "insufficient_quota": "usage_limit",
        "usage_limit_reached": "usage_limit",
        "billing_hard_limit_reached": "usage_limit",
        "RateLimitError": "rate_limit",
        "APIConnectionError": "api",
        "APITimeoutError": "api",
    },
    statuses={401: "auth", 403: "auth", 503: "overloaded", 529: "overloaded"},
)
"""The OpenAI SDK's errors as ours, by error code (a 429 whose code says the quota or usage is
spent: waiting a moment does not cure it, so the run pauses), then by exception class, then by
HTTP status (403 is a login problem here: a key without access)."""

_REMEMBERED: Final = 1024
_CANCEL_BOUND_S: Final = 5.0
_LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
JSON_REASK: Final = (
    "Your last reply was not a JSON value ({problem}). Reply again with only the JSON value that matches "
    "the requested schema: no prose and no code fence."
)


class OpenAIProvider(ProviderBase[OpenAISettings]):
    """An :class:`~workflow_mcp.providers.base.AgentProvider` calling an OpenAI-compatible endpoint
    (module docstring). Construct directly or through the registry (``get_provider("openai",
    settings)``); the HTTP client is created on the first call and closed by :meth:`aclose`. Use
    one instance per event loop. Raises
    :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad settings.
    """

    name = "openai"
    settings_type = OpenAISettings
    install_hint = INSTALL
    # It runs no tools (the model only answers), so network control does not apply: None.
    capabilities: Final = ProviderCapabilities(images=True, token_usage=True)
    accepts_claude_models: Final = False

    def setup(self) -> None:
        """The model and the backend's name in messages (the HTTP client starts with the first call)."""
        self.model: str = self.settings.model or ""  # check_more: never empty
        self.backend = self.settings.backend or "openai"
        self._client: Any = None
        self._conversations: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
        self._closed = False

    # -- registry ------------------------------------------------------------------------------
    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        """Availability without a request: the SDK importable, a model configured, and whether a
        key is set (by its variable's *name*; a loopback endpoint needs none)."""
        if importlib.util.find_spec("openai") is None:
            return Availability(False, problem="the openai SDK is not installed", install=INSTALL)
        version = dist_version("openai")
        base_url = settings.get("base_url")
        location = str(base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")
        if not settings.get("model"):
            return Availability(
                False,
                version=version,
                location=location,
                problem='no model configured: set [providers.openai] model = "<the model the endpoint serves>" '
                "(and base_url for a local server)",
                install=INSTALL,
            )
        key_env = str(settings.get("api_key_env") or "OPENAI_API_KEY")
        if os.environ.get(key_env):
            return Availability(
                True, version=version, location=location, logged_in=True, login=f"{key_env} is set"
            )
        if _is_local(location):
            return Availability(
                True,
                version=version,
                location=location,
                logged_in=None,
                login="a local endpoint: no key needed",
            )
        return Availability(
            True,
            version=version,
            location=location,
            logged_in=False,
            problem=f"{key_env} is not set: set it to the endpoint's API key",
        )

    @classmethod
    def check_more(cls, settings: Mapping[str, Any], source: str) -> None:
        """``model`` is required: raises :class:`~workflow_mcp.providers.config.ProviderConfigError`."""
        if not settings.get("model"):
            raise ProviderConfigError(
                source,
                "providers.openai.model",
                "is required: the model the endpoint serves (e.g. 'gpt-5.4-mini')",
            )

    # -- the AgentProvider call ----------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """One request (or a few, for format re-asks) for ``request`` (module docstring).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError`,
        :class:`~workflow_mcp.providers.base.AgentExecutionError`,
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (the SDK does not import), or
        :class:`asyncio.CancelledError` (the signal fired; the request was abandoned).
        """
        self.begin(context)
        client = self._connect()
        strict = to_strict(request.schema) if request.schema is not None and self.settings.strict else None
        key = (request.run_id, request.agent_id)
        messages = self._messages(request, key)
        previous = request.session if self.settings.api == "responses" and request.attempt == 1 else None
        usage = TokenUsage()
        asks = 0
        while True:
            reply = await self._cancellable(self._send(client, request, messages, strict, previous), context)
            usage += reply.usage
            if reply.failed is not None:
                return replace(reply.failed, usage=usage)
            messages.append({"role": "assistant", "content": reply.text or reply.refusal or ""})
            self._remember(key, messages, request)
            session = reply.response_id
            if reply.refusal is not None:
                return AgentResult(
                    text=reply.refusal,
                    usage=usage,
                    session=session,
                    message=f"{self.backend}: the model refused",
                )
            if request.schema is None:
                return AgentResult(text=reply.text or "", usage=usage, session=session)
            ok, value, problem = parse_answer(reply.text or "")
            if ok:
                projected = strict.project(value) if strict is not None else value
                return AgentResult(structured=projected, has_structured=True, usage=usage, session=session)
            if not await ask_again(
                context, backend=self.backend, problem=problem, asks=asks, retries=self.settings.json_retries
            ):
                return AgentResult(
                    text=reply.text,
                    usage=usage,
                    session=session,
                    message=f"{self.backend}'s reply is not a JSON value ({problem})",
                )
            asks += 1
            messages.append({"role": "user", "content": JSON_REASK.format(problem=problem)})
            previous = None

    async def aclose(self) -> None:
        """Close the HTTP client (idempotent)."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    # -- internals -------------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._client is not None:
            return self._client
        sdk = load_sdk("openai", package="openai", install=INSTALL)
        key = os.environ.get(self.settings.api_key_env)
        if not key:
            if not _is_local(self.settings.base_url or os.environ.get("OPENAI_BASE_URL") or ""):
                raise ProviderAuthError(
                    self.backend,
                    f"{self.settings.api_key_env} is not set",
                    login_hint=f"set {self.settings.api_key_env}",
                )
            key = "no-key-needed"  # a local server ignores it; the SDK insists on one
        self._client = sdk.AsyncOpenAI(
            api_key=key,
            base_url=self.settings.base_url,
            timeout=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )
        return self._client

    def _messages(self, request: AgentRequest, key: tuple[str, str]) -> list[dict[str, Any]]:
        """The conversation to send: on a schema re-ask, the remembered one plus the feedback."""
        if request.attempt > 1 and request.feedback and request.agent_id:
            known = self._conversations.pop(key, None)
            if known is not None:
                return [*known, {"role": "user", "content": request.feedback}]
        prompt = request.prompt if not request.feedback else f"{request.prompt}\n\n{request.feedback}"
        system: list[dict[str, Any]] = [
            {"role": "system", "content": text}
            for text in (self.settings.system_prompt, request.instructions)
            if text
        ]
        content: Any = prompt
        if request.images:  # Chat Completions content parts; _send rewrites them for Responses
            content = [
                {"type": "text", "text": prompt},
                *({"type": "image_url", "image_url": {"url": image.data_url}} for image in request.images),
            ]
        return [*system, {"role": "user", "content": content}]

    def _remember(self, key: tuple[str, str], messages: list[dict[str, Any]], request: AgentRequest) -> None:
        if request.schema is None or not request.agent_id:
            return
        self._conversations[key] = messages
        self._conversations.move_to_end(key)
        while len(self._conversations) > _REMEMBERED:
            self._conversations.popitem(last=False)

    async def _cancellable(self, coro: Coroutine[Any, Any, _Reply], context: AgentContext) -> _Reply:
        """Run the request as a task; cancel it when the signal fires or this call is cancelled."""
        task: asyncio.Future[_Reply] = asyncio.ensure_future(coro)
        cancel_wait: asyncio.Future[Any] = asyncio.ensure_future(context.signal.wait())
        try:
            done, _ = await asyncio.wait([task, cancel_wait], return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                task.cancel()
                await asyncio.wait({task}, timeout=_CANCEL_BOUND_S)
                raise asyncio.CancelledError(context.signal.reason)
            return task.result()
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            cancel_wait.cancel()

    async def _send(
        self,
        client: Any,
        request: AgentRequest,
        messages: list[dict[str, Any]],
        strict: StrictSchema | None,
        previous: str | None,
    ) -> _Reply:
        sdk = importlib.import_module("openai")
        model = request.model or self.model
        effort = self.settings.efforts.get(request.effort) if request.effort else None
        schema: Mapping[str, Any] | None = strict.schema if strict is not None else request.schema
        extra = {"extra_body": self.settings.extra_body} if self.settings.extra_body else {}
        try:
            if self.settings.api == "chat":
                kwargs: dict[str, Any] = {"model": model, "messages": messages, **extra}
                if schema is not None:
                    kwargs["response_format"] = {
                        "type": "json_schema",
                        "json_schema": {
                            "name": SCHEMA_NAME,
                            "schema": dict(schema),
                            "strict": strict is not None,
                        },
                    }
                if effort is not None:
                    kwargs["reasoning_effort"] = effort
                return _chat_reply(await client.chat.completions.create(**kwargs))
            params: dict[str, Any] = {"model": model, **extra}
            if previous is not None:
                params["previous_response_id"] = previous
                params["input"] = [_responses_item(m) for m in messages[-1:]]
            else:
                params["input"] = [_responses_item(m) for m in messages if m["role"] != "system"]
                system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
                if system:
                    params["instructions"] = system
            if schema is not None:
                params["text"] = {
                    "format": {
                        "type": "json_schema",
                        "name": SCHEMA_NAME,
                        "schema": dict(schema),
                        "strict": strict is not None,
                    }
                }
            if effort is not None:
                params["reasoning"] = {"effort": effort}
            return _responses_reply(await client.responses.create(**params))
        except sdk.OpenAIError as exc:  # foreign errors are translated once, here
            return self._failure(exc)
        except RecursionError:  # the SDK's JSON reader recursed through a body nested too deeply
            raise AgentExecutionError(f"{self.backend}: {NestingError('its response')}") from None

    def _failure(self, exc: Any) -> _Reply:
        """An SDK error as our outcome (:data:`FAILURES`): raises for a login, a usage limit or an
        execution error; a ``provider_failed`` reply for load and API or transport failures."""
        status = getattr(exc, "status_code", None)
        wait = _retry_after(exc)
        kind = FAILURES.kind(
            _error_code(exc), type(exc).__name__, status=status if isinstance(status, int) else None
        )
        detail = _detail(exc) if isinstance(exc, _sdk_status_errors()) else f"{type(exc).__name__}: {exc}"
        failed = failure_outcome(
            kind,
            backend=self.backend,
            detail=detail,
            login_hint=f"set {self.settings.api_key_env}",
            resets_at=_utc_after(wait) if wait is not None else None,
            retry_after_s=wait,
        )
        return _Reply(failed=replace(failed, message=f"{self.backend}: {detail}"))


class _Reply:
    """One response, reduced: ``text`` or ``refusal``, ``usage``, the ``response_id`` (Responses
    API), or ``failed`` (the ``provider_failed`` result)."""

    def __init__(
        self,
        *,
        text: str | None = None,
        refusal: str | None = None,
        usage: TokenUsage | None = None,
        response_id: str | None = None,
        failed: AgentResult | None = None,
    ) -> None:
        self.text = text
        self.refusal = refusal
        self.usage = usage or TokenUsage()
        self.response_id = response_id
        self.failed = failed


def _responses_item(message: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions message as a Responses API input item: content parts become
    ``input_text`` and ``input_image`` (a ``data:`` URL)."""
    content = message["content"]
    if isinstance(content, str):
        return dict(message)
    parts = [
        {"type": "input_text", "text": part["text"]}
        if part["type"] == "text"
        else {"type": "input_image", "image_url": part["image_url"]["url"]}
        for part in content
    ]
    return {"role": message["role"], "content": parts}


def _chat_reply(response: Any) -> _Reply:
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    usage = getattr(response, "usage", None)
    cached = int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0) or 0)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    return _Reply(
        text=getattr(message, "content", None),
        refusal=getattr(message, "refusal", None) or None,
        usage=TokenUsage(
            input=max(0, prompt - cached),
            output=int(getattr(usage, "completion_tokens", 0) or 0),
            cache_read=cached,
        ),
    )


def _responses_reply(response: Any) -> _Reply:
    refusal = None
    for item in getattr(response, "output", None) or []:
        for part in getattr(item, "content", None) or []:
            if getattr(part, "type", None) == "refusal":
                refusal = str(getattr(part, "refusal", ""))
    usage = getattr(response, "usage", None)
    cached = int(getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0) or 0)
    prompt = int(getattr(usage, "input_tokens", 0) or 0)
    return _Reply(
        text=getattr(response, "output_text", None),
        refusal=refusal,
        usage=TokenUsage(
            input=max(0, prompt - cached),
            output=int(getattr(usage, "output_tokens", 0) or 0),
            cache_read=cached,
        ),
        response_id=getattr(response, "id", None),
    )


def _detail(exc: Any) -> str:
    """The endpoint's error message (``error.message`` of the body), else the SDK's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    status = getattr(exc, "status_code", None)
    text = str(getattr(exc, "message", None) or exc)
    return f"HTTP {status}: {text}" if status and str(status) not in text else text


def _sdk_status_errors() -> tuple[type[BaseException], ...]:
    """The SDK's errors that carry an endpoint answer (a body, a status) or a transport failure."""
    sdk = importlib.import_module("openai")
    return (sdk.APIStatusError, sdk.APIConnectionError)


def _error_code(exc: Any) -> str | None:
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    code = inner.get("code") if isinstance(inner, Mapping) else getattr(exc, "code", None)
    return code if isinstance(code, str) else None


def _retry_after(exc: Any) -> float | None:
    """Seconds the answer asked to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an
    HTTP date), as the OpenAI and Anthropic APIs send them; ``None`` when it did not say."""
    import email.utils
    import time

    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(raw))
    with contextlib.suppress(TypeError, ValueError, IndexError):
        when = email.utils.parsedate_to_datetime(raw).timestamp()
        return max(0.0, when - time.time())
    return None


def _utc_after(seconds: float) -> str:
    import datetime

    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _is_local(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return host in _LOCAL_HOSTS or host.startswith("127.")
