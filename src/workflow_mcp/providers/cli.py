"""The ``cli`` provider: any agent program that has neither ACP nor an SDK, driven as a plain
command line (one process per call, no shell, no pseudo-terminal).

Each agent() call runs the configured ``command`` once (a format re-ask runs it again):

- **Command.** ``command`` is the argument list, e.g. ``["agy", "--json", "{prompt_file}"]``; its
  first item is the program (a name on ``PATH`` or a path). Placeholders, replaced inside any item:
  ``{prompt}`` (the prompt text itself), ``{prompt_file}`` (a file holding it), ``{cwd}`` (the
  call's working directory). The ``args`` table adds argument groups only when the call has the
  value: ``model`` (``{model}``: the call's model, else the ``model`` setting), ``effort``
  (``{effort}``), ``schema`` (``{schema_file}``: the JSON Schema as a file; ``{schema}``: its text)
  and ``image`` (``{image_file}``: repeated once per image attachment). An unknown placeholder is a
  configuration error naming the key. No shell ever reads these values.
- **Prompt.** Written to the program's standard input unless ``command`` names ``{prompt}`` or
  ``{prompt_file}`` (then standard input is empty). A schema call's prompt ends with the
  instruction to answer with only a JSON value matching the schema (shown verbatim;
  ``schema_in_prompt = false`` leaves it out for a program that takes ``args.schema``). An
  ``agentType``'s instructions come first, framed as its system prompt.
- **Answer.** ``output = "text"`` (default): the whole standard output, trimmed. ``output =
  "json"``: standard output is one JSON document; ``output = "jsonl"``: one JSON value per line,
  the *last* line holding ``answer_path`` answers (nothing there: agent() rejects naming the
  setting). ``answer_path`` is a dotted path into it
  (``result``, ``choices.0.message.content``; default ``result``); ``structured_path`` names a
  JSON value to take as a schema call's answer as is (e.g. ``structured_output``); ``usage`` maps
  ``input``, ``output``, ``cache_read`` and ``cache_write`` to dotted paths of token counts;
  ``session_path`` the session id reported as ``AgentResult.session``; ``error_path`` a flag that
  marks the document a failure even at exit status 0 (Claude Code's ``is_error``) and
  ``status_path`` the upstream HTTP status it reports (``api_error_status``).
- **Structured output.** The answer text is read by :func:`~.schema.parse_answer` (the whole text
  as JSON, else its last ```json fence). A reply without JSON is asked again (the program runs
  again with the reply and the re-ask) up to ``json_retries`` times
  (:func:`~._kit.ask_again`), then returned with ``has_structured=False``; the engine validates
  the value and re-asks with its feedback, which is appended to the prompt of a new run.
- **Outcomes.** Exit status 0 is an answer (unless ``error_path`` says it failed). Otherwise the
  failure's kind is the ``exit_codes`` entry of the status, else the upstream HTTP status at
  ``status_path`` (401/403 a login, 429 a rate limit, 503/529 an overload, other 5xx an API
  failure), else the first ``patterns`` entry (``auth``, ``usage_limit``, ``rate_limit``,
  ``overloaded``, ``api``; regular expressions, case-insensitive) found in what the program said
  (standard error; else, for JSON output, the text at ``answer_path``; else standard output), else
  ``execution`` (agent() rejects with what it said).
  ``auth`` pauses the run for a login (``login_hint`` says how), ``usage_limit`` pauses it until
  the limit resets, ``rate_limit``/``overloaded``/``api`` resolve ``null`` (the engine retries load
  with backoff) (:func:`~._kit.failure_outcome`). Default patterns: :data:`DEFAULT_PATTERNS`.
- **Limits.** Standard output is bounded by ``max_output_bytes`` (default 16 MiB; passing it kills
  the program and rejects the call naming the setting); standard error keeps its last 64 KiB. A
  call is bounded by ``timeout_s`` (default 600): then the program is killed and the call resolves
  ``null`` (``provider_failed``, saying so). Whatever it writes (standard output or error) is a
  sign of life for the engine's stall window; the last line of each standard-error chunk is a
  ``progress`` event.
- **Cancellation and cleanup.** The program runs in a process group of its own. Cancelling a call
  (its signal, or its task), a timeout, the output limit and the program's own exit all end the
  *whole group*: ``SIGTERM``, then ``SIGKILL`` after ``kill_grace_s`` (default 5 s), so no child or
  grandchild it started outlives the call.
- **Environment and policy.** The program sees only the allowlisted environment
  (:func:`~.policy.allowed_env`: the base set, ``env`` and the policy's names) plus ``set_env``.
  It runs with your own permissions: the policy's sandbox and network limits are not enforced on a
  program this provider knows nothing of (its capabilities say ``sandbox_control = false``); give
  it its own sandbox flags in ``command`` or wrap it (e.g. ``bwrap``).
- **Capabilities.** Declared in the settings (the program's abilities are not discoverable):
  ``images`` (default false: a call with an image attachment is refused, naming the capability;
  true needs ``args.image``, where each image is a file of its type's suffix)
  and ``structured_output`` (default true).

Settings (``[providers.cli]``): ``command`` (required; only the user's own configuration may set
it, as ``args`` and ``set_env``), ``args`` (table, above), ``output``, ``answer_path``,
``structured_path``, ``usage``, ``session_path``, ``error_path``, ``status_path``, ``model``, ``cwd``, ``env``, ``set_env``,
``schema_in_prompt``, ``exit_codes`` (table: status → kind), ``patterns`` (table: kind → regular
expression, replacing that kind's default), ``name`` (the backend name in messages and pauses;
default the program's file name), ``login_hint``, ``images``, ``structured_output``,
``json_retries`` (default 1), ``timeout_s``, ``kill_grace_s``, ``max_output_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from .._nesting import loads
from ._kit import (
    HTTP_STATUSES,
    FailureKind,
    FailureTable,
    ProviderBase,
    ask_again,
    at_least,
    configured_program,
    failure_outcome,
    more_than,
    one_of,
    program_version,
)
from .base import (
    AgentContext,
    AgentExecutionError,
    AgentRequest,
    AgentResult,
    ProviderCapabilities,
    ProviderEvent,
    ProviderSetupError,
    TokenUsage,
)
from .config import ProviderConfigError
from .policy import allowed_env
from .registry import Availability, ProviderStartError
from .schema import parse_answer

__all__ = [
    "DEFAULT_PATTERNS",
    "JSON_INSTRUCTION",
    "JSON_REASK",
    "PLACEHOLDERS",
    "CLIProvider",
    "CLISettings",
]

KINDS: Final = ("auth", "usage_limit", "rate_limit", "overloaded", "api", "execution")
PLACEHOLDERS: Final[Mapping[str, tuple[str, ...]]] = {
    "command": ("prompt", "prompt_file", "cwd"),
    "model": ("model",),
    "effort": ("effort",),
    "schema": ("schema_file", "schema"),
    "image": ("image_file",),
}
"""The placeholders each part of the command may name: ``command`` itself, and each ``args`` group."""
_PLACEHOLDER: Final = re.compile(r"\{([a-z_]+)\}")
DEFAULT_PATTERNS: Final[Mapping[str, str]] = {
    "auth": r"\b401\b|unauthori[sz]ed|not logged in|log ?in (first|again|required)|please log ?in"
    r"|invalid api key|authentication (required|failed)",
    "usage_limit": r"usage limit|insufficient_quota|quota exceeded|exceeded your (current )?quota",
    "rate_limit": r"\b429\b|rate.?limit",
    "overloaded": r"\b(503|529)\b|overloaded",
    "api": r"\b5\d\d\b|connection (refused|reset|failed|error)|timed out|network error",
}
"""The failure kinds told from a failed program's standard error or output when ``exit_codes``
does not name its status: the first kind whose expression is found wins, in this order."""
JSON_INSTRUCTION: Final = (
    "\n\nWhen you have finished, reply with only a JSON value that matches the JSON Schema below: no "
    "prose before or after it and no code fence. JSON Schema:\n{schema}"
)
JSON_REASK: Final = (
    "{prompt}\n\nYour last reply was:\n{reply}\n\nThat reply was not a JSON value ({problem}). Reply "
    "again with only the JSON value that matches the JSON Schema given above: no prose and no code fence."
)
AGENT_PREAMBLE: Final = (
    "You act as the agent described by the instructions between the two <agent-instructions> lines; "
    "they are your system prompt, not part of the task.\n"
    "<agent-instructions>\n{instructions}\n</agent-instructions>\n\nThe task:\n{prompt}"
)
_STATUS_TABLE: Final = FailureTable("cli", kinds={}, statuses={**HTTP_STATUSES, 403: "auth"})
"""An upstream HTTP status a program reports (``status_path``) as ours; any other 5xx is ``api``."""
_STDERR_KEPT: Final = 64 * 1024
_READ_CHUNK: Final = 64 * 1024
_MESSAGE_TAIL: Final = 2000


@dataclass(frozen=True)
class CLISettings:
    """``[providers.cli]`` (module docstring), checked by :func:`~._kit.check_settings`."""

    command: list[str] | None = None
    args: dict[str, list[str]] = field(default_factory=dict)
    output: str = field(default="text", metadata=one_of(("text", "json", "jsonl")))
    answer_path: str = "result"
    structured_path: str | None = None
    usage: dict[str, str] = field(default_factory=dict)
    session_path: str | None = None
    error_path: str | None = None
    status_path: str | None = None
    model: str | None = None
    cwd: str | None = None
    env: list[str] = field(default_factory=list)
    set_env: dict[str, str] = field(default_factory=dict)
    schema_in_prompt: bool = True
    exit_codes: dict[str, str] = field(default_factory=dict, metadata=one_of(KINDS))
    patterns: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    login_hint: str | None = None
    images: bool = False
    structured_output: bool = True
    json_retries: int = field(default=1, metadata=at_least(0))
    timeout_s: float = field(default=600.0, metadata=more_than(0))
    kill_grace_s: float = field(default=5.0, metadata=more_than(0))
    max_output_bytes: int = field(default=16 * 1024 * 1024, metadata=at_least(1))


class CLIProvider(ProviderBase[CLISettings]):
    """An :class:`~workflow_mcp.providers.base.AgentProvider` running an agent program once per call
    (module docstring). Construct directly or through the registry (``get_provider("cli",
    settings)``). Nothing starts until :meth:`execute`; :meth:`aclose` kills the process groups of
    calls still running. Raises :class:`~workflow_mcp.providers.config.ProviderConfigError` for bad
    settings (naming the key).
    """

    name = "cli"
    settings_type = CLISettings
    install_hint = "install the agent program, then set [providers.cli] command in your own config"
    capabilities: ProviderCapabilities = ProviderCapabilities(structured_output=True, cancellation=True)
    accepts_claude_models: Final = False

    @classmethod
    def check_more(cls, settings: Mapping[str, Any], source: str) -> None:
        """``command`` is required and non-empty; placeholders are known ones; ``args`` groups,
        ``usage`` keys, ``exit_codes`` keys and ``patterns`` are checked. Raises
        :class:`~workflow_mcp.providers.config.ProviderConfigError` naming the key."""
        command = settings.get("command")
        if not command:
            raise ProviderConfigError(
                source,
                "providers.cli.command",
                'is required: the agent program and its arguments, e.g. ["agy", "--json", "{prompt_file}"] '
                "(in your own configuration file)",
            )
        _check_placeholders(command, PLACEHOLDERS["command"], "providers.cli.command", source)
        for group, items in (settings.get("args") or {}).items():
            where = f"providers.cli.args.{group}"
            if group not in PLACEHOLDERS or group == "command":
                known = ", ".join(k for k in PLACEHOLDERS if k != "command")
                raise ProviderConfigError(source, where, f"unknown argument group; expected one of {known}")
            _check_placeholders(items, PLACEHOLDERS[group], where, source)
        if settings.get("images") and "image" not in (settings.get("args") or {}):
            raise ProviderConfigError(
                source,
                "providers.cli.images",
                'needs args.image, the arguments that hand the program one image file, e.g. ["--image", "{image_file}"]',
            )
        for key in settings.get("usage") or {}:
            if key not in ("input", "output", "cache_read", "cache_write"):
                raise ProviderConfigError(
                    source, f"providers.cli.usage.{key}", "expected input, output, cache_read or cache_write"
                )
        for code in settings.get("exit_codes") or {}:
            if not re.fullmatch(r"-?\d+", str(code)):
                raise ProviderConfigError(
                    source, f"providers.cli.exit_codes.{code}", "must be an exit status"
                )
        for kind, pattern in (settings.get("patterns") or {}).items():
            where = f"providers.cli.patterns.{kind}"
            if kind not in DEFAULT_PATTERNS:
                raise ProviderConfigError(source, where, f"expected one of {', '.join(DEFAULT_PATTERNS)}")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ProviderConfigError(source, where, f"is not a regular expression: {exc}") from exc

    def setup(self) -> None:
        """The program, the failure patterns and the declared capabilities (nothing starts)."""
        given = self.settings
        command = given.command or []
        self.program = command[0]
        self.backend = given.name or os.path.basename(self.program)
        self.patterns = [
            (cast(FailureKind, kind), re.compile(given.patterns.get(kind, default), re.IGNORECASE))
            for kind, default in DEFAULT_PATTERNS.items()
        ]
        self.exit_kinds = {int(code): cast(FailureKind, kind) for code, kind in given.exit_codes.items()}
        self.cwd = os.path.abspath(os.path.expanduser(given.cwd)) if given.cwd else None
        self.capabilities = ProviderCapabilities(
            structured_output=given.structured_output, images=given.images, cancellation=True
        )
        self._running: set[asyncio.subprocess.Process] = set()
        self._closed = False

    # -- registry ------------------------------------------------------------------------------
    @classmethod
    def probe(cls, settings: Mapping[str, Any]) -> Availability:
        """Availability without a call: ``command`` configured and its program an executable file
        (its ``--version``, bounded to 10 s, is the version). Whether it is logged in cannot be told
        (``logged_in`` is ``None``): a refused login pauses the run on the first call."""
        command = settings.get("command")
        if not isinstance(command, list | tuple) or not command or not isinstance(command[0], str):
            return Availability(
                False,
                problem='no command configured: set [providers.cli] command = ["program", "{prompt_file}"] '
                "in your own configuration file",
            )
        path, _ = configured_program(os.path.expanduser(command[0]))
        if path is None:
            return Availability(
                False,
                location=command[0],
                problem=f"the program {command[0]!r} (the first item of command) is not an executable file",
            )
        return Availability(
            True,
            version=program_version(path, "last"),
            location=path,
            logged_in=None,
            login="unknown until the program answers (a refused login pauses the run)",
        )

    # -- the AgentProvider call ----------------------------------------------------------------
    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        """Run the program for ``request`` (module docstring for the outcomes).

        Raises :class:`~workflow_mcp.providers.base.ProviderAuthError`,
        :class:`~workflow_mcp.providers.base.ProviderUsageLimitError`,
        :class:`~workflow_mcp.providers.base.AgentExecutionError` (a failure of kind ``execution``,
        the output limit, a call it cannot honour),
        :class:`~workflow_mcp.providers.registry.ProviderStartError` (the program cannot start), or
        :class:`asyncio.CancelledError` (the signal fired; the process group was killed).
        """
        self.begin(context)
        if request.schema is not None and not self.capabilities.structured_output:
            raise AgentExecutionError(
                f"{self.backend}: this call needs structured output and the provider declares none "
                "(providers.cli.structured_output = false)"
            )
        prompt = self._prompt(request)
        usage = TokenUsage()
        asks = 0
        with tempfile.TemporaryDirectory(prefix="workflow-mcp-cli-") as scratch:
            current = prompt
            while True:
                outcome = await self._run_once(request, current, scratch, context)
                usage += outcome.usage
                if outcome.failed is not None:
                    return AgentResult(
                        outcome=outcome.failed.outcome,
                        message=outcome.failed.message,
                        usage=usage,
                        failure=outcome.failed.failure,
                    )
                if request.schema is None:
                    return AgentResult(text=outcome.text, usage=usage, session=outcome.session)
                if outcome.has_structured:
                    return AgentResult(
                        structured=outcome.structured,
                        has_structured=True,
                        usage=usage,
                        session=outcome.session,
                    )
                ok, value, problem = parse_answer(outcome.text)
                if ok:
                    return AgentResult(
                        structured=value, has_structured=True, usage=usage, session=outcome.session
                    )
                if not await ask_again(
                    context,
                    backend=self.backend,
                    problem=problem,
                    asks=asks,
                    retries=self.settings.json_retries,
                ):
                    return AgentResult(
                        text=outcome.text,
                        usage=usage,
                        session=outcome.session,
                        message=f"{self.backend}'s reply is not a JSON value ({problem})",
                    )
                asks += 1
                current = JSON_REASK.format(prompt=prompt, reply=outcome.text, problem=problem)

    async def aclose(self) -> None:
        """Kill the process group of every call still running (idempotent); later calls are refused."""
        self._closed = True
        for proc in list(self._running):
            await self._kill(proc)

    # -- one run of the program ----------------------------------------------------------------
    def _prompt(self, request: AgentRequest) -> str:
        prompt = request.prompt
        if request.schema is not None and self.settings.schema_in_prompt:
            prompt += JSON_INSTRUCTION.format(schema=json.dumps(dict(request.schema), ensure_ascii=False))
        if request.instructions:
            prompt = AGENT_PREAMBLE.format(instructions=request.instructions, prompt=prompt)
        if request.feedback:
            prompt += "\n\n" + request.feedback
        return prompt

    def _argv(self, request: AgentRequest, prompt: str, scratch: str, cwd: str) -> tuple[list[str], bool]:
        """The argument list for one run and whether the prompt goes to standard input."""
        command = self.settings.command or []
        groups = self.settings.args
        values: dict[str, str] = {"prompt": prompt, "cwd": cwd}
        stdin = not any("{prompt}" in item or "{prompt_file}" in item for item in command)
        if not stdin:
            values["prompt_file"] = _write(scratch, "prompt.txt", prompt.encode())
        argv = [_fill(item, values) for item in command]
        model = request.model or self.settings.model
        if model and "model" in groups:
            argv += [_fill(item, {"model": model}) for item in groups["model"]]
        if request.effort and "effort" in groups:
            argv += [_fill(item, {"effort": request.effort}) for item in groups["effort"]]
        if request.schema is not None and "schema" in groups:
            text = json.dumps(dict(request.schema), ensure_ascii=False)
            path = _write(scratch, "schema.json", text.encode())
            argv += [_fill(item, {"schema_file": path, "schema": text}) for item in groups["schema"]]
        images = request.images
        if images and (not self.capabilities.images or "image" not in groups):
            raise ProviderSetupError(
                f"{self.backend}: this call has image attachments and the provider declares no image input "
                '(capability images: set providers.cli.images = true and args.image = ["--image", "{image_file}"])'
            )
        for i, image in enumerate(images):
            path = _write(scratch, f"image-{i + 1}{_suffix(image.mime_type)}", image.data)
            argv += [_fill(item, {"image_file": path}) for item in groups["image"]]
        return argv, stdin

    async def _run_once(
        self, request: AgentRequest, prompt: str, scratch: str, context: AgentContext
    ) -> _Run:
        cwd = os.path.abspath(request.cwd or self.cwd or os.getcwd())
        argv, stdin = self._argv(request, prompt, scratch, cwd)
        program = shutil.which(os.path.expanduser(argv[0])) or argv[0]
        env = allowed_env(self.policy, self.settings.env)
        env.update(self.settings.set_env)
        try:
            proc = await asyncio.create_subprocess_exec(
                program,
                *argv[1:],
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own process group: killed whole, grandchildren too
            )
        except OSError as exc:
            raise ProviderStartError(f"{self.backend}: cannot start {argv[0]!r}: {exc}") from exc
        self._running.add(proc)
        try:
            return await self._follow(proc, prompt if stdin else None, context)
        finally:
            await self._kill(proc)
            self._running.discard(proc)

    async def _follow(
        self, proc: asyncio.subprocess.Process, stdin: str | None, context: AgentContext
    ) -> _Run:
        """Feed, read and await one process; cancellation, the timeout and the output limit end it.

        The program's end is told by its pid (a pidfd), not by its pipes closing: a grandchild that
        kept standard output open must not keep the call waiting."""
        assert proc.stdout is not None and proc.stderr is not None
        out = _Capture(self.settings.max_output_bytes)
        err = _Capture(_STDERR_KEPT, keep_tail=True)
        tasks = [
            asyncio.ensure_future(_feed(proc, stdin)),
            reading := asyncio.ensure_future(out.read(proc.stdout, context=context)),
            asyncio.ensure_future(err.read(proc.stderr, context=context, quote=True)),
            ended := asyncio.ensure_future(_exited(proc)),
            cancelled := asyncio.ensure_future(context.signal.wait()),
        ]
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                while not ended.done():
                    await asyncio.wait({ended, cancelled, reading}, return_when=asyncio.FIRST_COMPLETED)
                    if cancelled.done():
                        raise asyncio.CancelledError(context.signal.reason)
                    if out.overflowed:
                        raise AgentExecutionError(self._overflow())
                    if reading.done() and not ended.done():
                        await asyncio.wait({ended, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            # The program ended: what it left behind in its group goes now, and what it wrote is
            # read to the end (bounded: a process outside its group may hold the pipe).
            await self._kill(proc)
            await asyncio.wait(tasks[1:3], timeout=self.settings.kill_grace_s)
        except TimeoutError:
            return _Run(
                failed=AgentResult(
                    outcome="provider_failed",
                    message=f"{self.backend}: no answer within {self.settings.timeout_s:g} s "
                    "(providers.cli.timeout_s); the program was stopped",
                )
            )
        finally:
            for task in tasks:
                task.cancel()
        if out.overflowed:
            raise AgentExecutionError(self._overflow())
        stdout = out.text()
        document = self._parsed(stdout)
        failed = proc.returncode != 0 or bool(
            self.settings.error_path and _at(document, self.settings.error_path)
        )
        if failed:
            return _Run(failed=self._failure(proc.returncode, stdout, err.text(), document))
        return self._answer(stdout)

    def _overflow(self) -> str:
        return (
            f"{self.backend}: the program's output passed the limit of {self.settings.max_output_bytes} "
            "bytes (providers.cli.max_output_bytes); it was stopped"
        )

    def _parsed(self, stdout: str) -> Any:
        """The output's JSON document (``None`` for text output or output that is not JSON)."""
        if self.settings.output == "text":
            return None
        try:
            return self._document(stdout)
        except AgentExecutionError:
            return None

    def _failure(self, status: int | None, stdout: str, stderr: str, document: Any) -> AgentResult:
        """A failed run as the engine's outcome (raises for ``auth``, ``usage_limit``, ``execution``)."""
        code = status if status is not None else -1
        answer = _at(document, self.settings.answer_path) if document is not None else None
        said = stderr.strip() or (answer.strip() if isinstance(answer, str) else stdout.strip())
        upstream = _at(document, self.settings.status_path) if self.settings.status_path else None
        kind: FailureKind = "execution"
        if code in self.exit_kinds:
            kind = self.exit_kinds[code]
        elif isinstance(upstream, int) and _STATUS_TABLE.kind(status=upstream) != "execution":
            kind = _STATUS_TABLE.kind(status=upstream)
        else:
            kind = next((k for k, pattern in self.patterns if pattern.search(said)), kind)
        how = f"exited with status {code}" if code != 0 else "reported a failure"
        detail = how + (f": {said[-_MESSAGE_TAIL:]}" if said else "")
        failed = failure_outcome(
            kind, backend=self.backend, detail=detail, login_hint=self.settings.login_hint
        )
        return AgentResult(
            outcome=failed.outcome, message=f"{self.backend}: {detail}", failure=failed.failure
        )

    def _answer(self, stdout: str) -> _Run:
        """The answer, usage and session read from a successful run's standard output."""
        if self.settings.output == "text":
            return _Run(text=stdout.strip())
        document = self._document(stdout)
        answer = _at(document, self.settings.answer_path)
        text = answer if isinstance(answer, str) else "" if answer is None else json.dumps(answer)
        usage = TokenUsage(**{key: _count(_at(document, path)) for key, path in self.settings.usage.items()})
        session = _at(document, self.settings.session_path) if self.settings.session_path else None
        run = _Run(text=text, usage=usage, session=str(session) if session is not None else None)
        if self.settings.structured_path:
            value = _at(document, self.settings.structured_path)
            if value is not None:
                run.structured, run.has_structured = value, True
        if answer is None and not run.has_structured:
            raise AgentExecutionError(
                f"{self.backend}: its output has nothing at {self.settings.answer_path!r} "
                f"(providers.cli.answer_path); it began: {stdout[:200]!r}"
            )
        return run

    def _document(self, stdout: str) -> Any:
        if self.settings.output == "json":
            try:
                return loads(stdout, what=f"{self.backend}'s output")
            except ValueError as exc:
                raise AgentExecutionError(
                    f'{self.backend}: its output is not JSON (providers.cli.output = "json"): {exc}; '
                    f"it began: {stdout[:200]!r}"
                ) from exc
        found: Any = None
        for line in stdout.splitlines():
            with contextlib.suppress(ValueError):
                value = loads(line, what=f"{self.backend}'s output line")
                if _at(value, self.settings.answer_path) is not None or found is None:
                    found = value
        if found is None:
            raise AgentExecutionError(
                f'{self.backend}: its output has no JSON line (providers.cli.output = "jsonl"); '
                f"it began: {stdout[:200]!r}"
            )
        return found

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        """End ``proc``'s whole process group: ``SIGTERM``, then ``SIGKILL`` after ``kill_grace_s``;
        returns once the program is reaped and its pipes closed (each wait bounded by the grace)."""
        grace = self.settings.kill_grace_s
        if _signal_group(proc.pid, signal.SIGTERM):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), grace)


@dataclass
class _Run:
    """One run of the program: its answer ``text`` (or ``structured`` value), ``usage``,
    ``session``, or the ``failed`` result."""

    text: str = ""
    structured: Any = None
    has_structured: bool = False
    usage: TokenUsage = field(default_factory=TokenUsage)
    session: str | None = None
    failed: AgentResult | None = None


class _Capture:
    """A pipe's bytes up to ``limit``: past it ``overflowed`` is set (or, ``keep_tail``, only the
    last ``limit`` bytes are kept)."""

    def __init__(self, limit: int, *, keep_tail: bool = False) -> None:
        self.limit = limit
        self.keep_tail = keep_tail
        self.data = bytearray()
        self.overflowed = False

    async def read(
        self, stream: asyncio.StreamReader, *, context: AgentContext | None = None, quote: bool = False
    ) -> None:
        """Read ``stream`` to its end (or the limit); each chunk is a ``progress`` event on
        ``context``, carrying its last line when ``quote``."""
        while chunk := await stream.read(_READ_CHUNK):
            self.data += chunk
            if len(self.data) > self.limit:
                if not self.keep_tail:
                    self.overflowed = True
                    return
                del self.data[: len(self.data) - self.limit]
            if context is not None:  # what the program writes is a sign of life for the stall window
                lines = chunk.decode("utf-8", "replace").strip().splitlines() if quote else []
                await context.emit(ProviderEvent(kind="progress", text=lines[-1][:500] if lines else ""))

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Return once ``proc`` itself has exited (its pipes may still be open), without reaping it:
    a pidfd turns readable at exit (Linux 5.3 and later); elsewhere, :meth:`~asyncio.subprocess.Process.wait`."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        await proc.wait()
        return
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not gone.done():
            gone.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await gone
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _feed(proc: asyncio.subprocess.Process, text: str | None) -> None:
    if proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if text is not None:
            proc.stdin.write(text.encode())
            await proc.stdin.drain()
        proc.stdin.close()


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _check_placeholders(items: Sequence[str], allowed: Sequence[str], where: str, source: str) -> None:
    for item in items:
        for name in _PLACEHOLDER.findall(item):
            if name not in allowed:
                raise ProviderConfigError(
                    source,
                    where,
                    f"unknown placeholder {{{name}}} in {item!r}; here one may use "
                    + ", ".join(f"{{{a}}}" for a in allowed),
                )


def _fill(item: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), item)


def _write(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def _suffix(mime_type: str) -> str:
    return {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}.get(
        mime_type, ""
    )


def _at(document: Any, path: str | None) -> Any:
    """The value at a dotted ``path`` (list items by index), ``None`` when there is none."""
    if path is None:
        return None
    value = document
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
