"""The closed, versioned message protocol between the host and the realm worker (JSON lines).

Protocol version 3. Every line is one JSON object with a ``t`` (type) field. What the worker sends is
read by :func:`decode_worker_message` into one frozen value per type (the ``WorkerMessage`` union);
anything else — an unknown type, a missing or mistyped field — is a :class:`ProtocolError` naming the
message and the field, never a ``KeyError`` deep in the host.

Worker → host:
    hello     {protocol, node}                                   first line after spawn
    call      {id, fn: "agent", prompt, opts, label, phase, child, key, canon, agentType?}
              {id, fn: "workflow", target: {name}|{scriptPath}}  (the args stay in the realm)
    phase     {title}                                            phase() in the top-level workflow
    log       {message, child}                                   log() and console.*, child = child
                                                                 workflow name (null: the top level)
    child     {name, ok, message?}                               a nested workflow ended (message: its stack)
    dropped   {lines}                                            log lines past the run's log limit
    returned  {}                                                 the workflow returned while workflow()
                                                                 calls still resolve: dispatch no agent
                                                                 call any more; ``done`` follows
    done      {ok, value?, error?: {name, message, stack?, location?}}   the run's end (value: JSON
                                                                 text); location {path, line, column,
                                                                 reported} names the throw in the file
    checked   {id, results: [null | {message, line, column}]}    answer to ``check``
    collated  {id, names}                                        answer to ``collate``

Host → worker:
    start     {body, bodyLine, bodyColumn, filename, args?, budgetTotal, spent, syncTimeoutMs,
               maxFanoutItems, maxValueDepth, boundary: {childDepth, finalDepth,
               childErrorMessageIsStack}, profile, cacheKeyOptions, flatCacheChain,
               fanoutStartDeferred, logLine: {max, keep}, logLimit: {lines, chars}}
              ``flatCacheChain`` (bool): every call's v2 key chains on the previous call's key, in
              call order, instead of parallel/pipeline slots forking and joining the chain (the
              profile's rule); ``fanoutStartDeferred`` (bool, default true): a fan-out's slots start
              as a 0 ms timer would fire, else inside the call; ``args`` is JSON text;
              ``budgetTotal`` null means no budget.
    result    {id, r: {ok, value? | error: {name, message, code?}, spent}}   an agent() answer;
              ``spent`` is the run's budget.spent() after it
    child     {id, name, phase, body, bodyLine, bodyColumn, filename, spent}   a resolved nested
              workflow (the worker starts it on the chain the workflow() call was made on)
    batch     {items: [result | child]}                          answers the realm resolves in one
                                                                 turn, in order, before any
                                                                 continuation runs
    check     {id, sources}                                      V8 syntax check, no run started
    collate   {id, names}                                        sort names as localeCompare does;
                                                                 also the host's quiescence probe

Inside the worker (never on the pipe): the workflow's realm posts ``timer {id, ms}`` and ``clear
{id}`` to the worker shell for ``setTimeout``/``clearTimeout``; the shell keeps the timer queue, so
no host timer handle reaches workflow code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "HOST_MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "WORKER_MESSAGE_TYPES",
    "AgentCallMessage",
    "Checked",
    "ChildEnded",
    "Collated",
    "Done",
    "DoneError",
    "Dropped",
    "HandedBack",
    "Hello",
    "Log",
    "Phase",
    "ProtocolError",
    "Released",
    "Returned",
    "Took",
    "WorkerMessage",
    "WorkflowCallMessage",
    "check_worker_message",
    "decode_worker_message",
]

PROTOCOL_VERSION: Final = 4

WORKER_MESSAGE_TYPES: Final = frozenset(
    {
        "hello",
        "call",
        "phase",
        "log",
        "child",
        "dropped",
        "returned",
        "done",
        "checked",
        "collated",
        "took",
        "released",
        "handback",
    }
)
HOST_MESSAGE_TYPES: Final = frozenset({"start", "replay", "result", "child", "batch", "check", "collate"})


class ProtocolError(ValueError):
    """Raised by :func:`decode_worker_message` when a worker line is not a well-formed protocol
    message; the text names the message type and the field."""


@dataclass(frozen=True, slots=True)
class Hello:
    """The worker's first line: the protocol it speaks and its Node version."""

    protocol: int
    node: str


@dataclass(frozen=True, slots=True)
class AgentCallMessage:
    """An agent() call. ``id`` names it in the answer; ``key`` is the v2 cache key (``""``: the call
    is not keyable), ``canon`` the canonical JSON of its cache-key options; ``agent_type`` is
    ``String()`` of its ``agentType`` option (``None``: none given); ``child`` the nested workflow
    that made it (``None``: the top level)."""

    id: int
    prompt: str
    opts: dict[str, Any]
    label: str
    phase: str | None
    child: str | None
    key: str
    canon: str
    agent_type: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowCallMessage:
    """A workflow() call: ``target`` is ``{"name": …}`` or ``{"scriptPath": …}``."""

    id: int
    target: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Phase:
    title: str


@dataclass(frozen=True, slots=True)
class Log:
    message: str
    child: str | None


@dataclass(frozen=True, slots=True)
class ChildEnded:
    """A nested workflow ended; ``message`` is its failure's stack (``None`` when ``ok``)."""

    name: str
    ok: bool
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Dropped:
    """``lines`` log lines were dropped past the run's log limit (counted in the worker)."""

    lines: int


@dataclass(frozen=True, slots=True)
class Took:
    """Agent() calls the realm answers itself from the replay table the host sent it (engine/run.py
    ``_replay_table``), in call order: each ``[id, record, label, phase, prompt, key, content key]``
    (``id`` names the call as a ``call`` message's would; ``record`` the index of the record it took;
    content key ``None``: the record's own). The host records them and never answers them, unless
    the realm hands them back (:class:`HandedBack`)."""

    calls: list[list[Any]]


@dataclass(frozen=True, slots=True)
class Released:
    """The realm handed the recorded results of the calls ``ids`` (each announced with ``local``) to
    the workflow in one delivery, in this order."""

    ids: list[int]


@dataclass(frozen=True, slots=True)
class HandedBack:
    """The realm stopped replaying by itself: the calls ``ids`` (announced with ``local``, not yet
    released) are the host's to answer from now on, and so is every later call; ``settled`` are the
    completion ranks it released as the run could make no progress without them (the host's release
    order takes them as settled)."""

    ids: list[int]
    settled: list[int]


@dataclass(frozen=True, slots=True)
class Returned:
    """The workflow returned while workflow() calls still resolve: no agent call is dispatched any
    more; :class:`Done` follows."""


@dataclass(frozen=True, slots=True)
class DoneError:
    """What a failed workflow threw: ``location`` is ``{path, line, column, reported}`` in the file."""

    name: str
    message: str
    stack: str | None = None
    location: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Done:
    """The run's end: ``value`` (JSON text) when ``ok``, else ``error``."""

    ok: bool
    value: str | None = None
    error: DoneError | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """The answer to ``check``: one ``None`` or ``{message, line, column}`` per source."""

    id: int
    results: list[Any]


@dataclass(frozen=True, slots=True)
class Collated:
    """The answer to ``collate`` (and to the host's quiescence probe)."""

    id: int
    names: list[Any]


_ABSENT: Final = object()

WorkerMessage = (
    Hello
    | AgentCallMessage
    | WorkflowCallMessage
    | Phase
    | Log
    | ChildEnded
    | Dropped
    | Returned
    | Took
    | Released
    | HandedBack
    | Done
    | Checked
    | Collated
)


def _int(msg: dict[str, Any], name: str, t: str) -> int:
    value = msg.get(name)
    if type(value) is not int:  # JSON integers only: bool is an int subclass, and no float
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    return value


def _str(msg: dict[str, Any], name: str, t: str) -> str:
    value = msg.get(name)
    if type(value) is not str:
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    return value


def _opt_str(msg: dict[str, Any], name: str, t: str) -> str | None:
    if name not in msg:
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    value = msg[name]
    if value is not None and type(value) is not str:
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    return value


def _ints(msg: dict[str, Any], name: str, t: str) -> list[int]:
    value = msg.get(name)
    if type(value) is not list or not all(type(v) is int for v in value):
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    return value


def _of(msg: dict[str, Any], name: str, kind: type, t: str) -> Any:
    value = msg.get(name)
    if not isinstance(value, kind):
        raise ProtocolError(f"a {t!r} message without a well-formed {name!r}")
    return value


def _call(msg: dict[str, Any]) -> AgentCallMessage | WorkflowCallMessage:
    fn = msg.get("fn")
    get = msg.get
    call_id, phase, child, agent_type = (
        get("id"),
        get("phase", _ABSENT),
        get("child", _ABSENT),
        get("agentType"),
    )
    if (  # the common case, checked at once; anything else is diagnosed field by field below
        fn == "agent"
        and type(call_id) is int
        and type(get("prompt")) is str
        and type(get("opts")) is dict
        and type(get("label")) is str
        and (phase is None or type(phase) is str)
        and (child is None or type(child) is str)
        and type(get("key")) is str
        and type(get("canon")) is str
        and (agent_type is None or type(agent_type) is str)
    ):
        return AgentCallMessage(
            call_id,
            msg["prompt"],
            msg["opts"],
            msg["label"],
            phase,
            child,
            msg["key"],
            msg["canon"],
            agent_type,
        )
    if fn == "agent":
        agent_type = msg.get("agentType")
        if agent_type is not None and type(agent_type) is not str:
            raise ProtocolError("a 'call' message without a well-formed 'agentType'")
        return AgentCallMessage(
            _int(msg, "id", "call"),
            _str(msg, "prompt", "call"),
            _of(msg, "opts", dict, "call"),
            _str(msg, "label", "call"),
            _opt_str(msg, "phase", "call"),
            _opt_str(msg, "child", "call"),
            _str(msg, "key", "call"),
            _str(msg, "canon", "call"),
            agent_type,
        )
    if fn == "workflow":
        call_id = _int(msg, "id", "call")
        target = _of(msg, "target", dict, "call")
        if not (isinstance(target.get("name"), str) or isinstance(target.get("scriptPath"), str)):
            raise ProtocolError("a workflow() call without a name or scriptPath")
        if "args" in msg and not isinstance(msg["args"], str):
            raise ProtocolError("a workflow() call whose args are not JSON text")
        return WorkflowCallMessage(call_id, target)
    raise ProtocolError(f"unknown call {fn!r}")


def _took(msg: dict[str, Any]) -> Took:
    calls = msg.get("calls")
    if type(calls) is not list:
        raise ProtocolError("a 'took' message without a well-formed 'calls'")
    for c in calls:
        if not (
            type(c) is list
            and len(c) == 7
            and type(c[0]) is int
            and type(c[1]) is int
            and type(c[2]) is str
            and (c[3] is None or type(c[3]) is str)
            and type(c[4]) is str
            and type(c[5]) is str
            and (c[6] is None or type(c[6]) is str)
        ):
            raise ProtocolError("a 'took' message with a malformed call")
    return Took(calls)


def _done(msg: dict[str, Any]) -> Done:
    ok = _of(msg, "ok", bool, "done")
    if ok:
        value = msg.get("value")
        if not isinstance(value, str):
            raise ProtocolError("a 'done' message without its value as JSON text")
        return Done(True, value)
    error = msg.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("name"), str):
        raise ProtocolError("a failed 'done' message without a well-formed error")
    if not isinstance(error.get("message"), str):
        raise ProtocolError("a failed 'done' message whose error has no message text")
    stack = error.get("stack")
    if stack is not None and not isinstance(stack, str):
        raise ProtocolError("a failed 'done' message whose stack is not text")
    location = error.get("location")
    return Done(
        False,
        error=DoneError(
            error["name"], error["message"], stack, location if isinstance(location, dict) else None
        ),
    )


def _child(msg: dict[str, Any]) -> ChildEnded:
    message = msg.get("message")
    if message is not None and not isinstance(message, str):
        raise ProtocolError("a 'child' message whose message is not text")
    return ChildEnded(_str(msg, "name", "child"), _of(msg, "ok", bool, "child"), message)


_DECODERS: Final[dict[str, Any]] = {
    "hello": lambda m: Hello(_int(m, "protocol", "hello"), _str(m, "node", "hello")),
    "call": _call,
    "phase": lambda m: Phase(_str(m, "title", "phase")),
    "log": lambda m: Log(_str(m, "message", "log"), _opt_str(m, "child", "log")),
    "child": _child,
    "dropped": lambda m: Dropped(_int(m, "lines", "dropped")),
    "returned": lambda m: Returned(),
    "took": lambda m: _took(m),
    "released": lambda m: Released(_ints(m, "ids", "released")),
    "handback": lambda m: HandedBack(_ints(m, "ids", "handback"), _ints(m, "settled", "handback")),
    "done": _done,
    "checked": lambda m: Checked(_int(m, "id", "checked"), _of(m, "results", list, "checked")),
    "collated": lambda m: Collated(_int(m, "id", "collated"), _of(m, "names", list, "collated")),
}


def decode_worker_message(msg: Any) -> WorkerMessage:
    """The value of one parsed worker line (protocol :data:`PROTOCOL_VERSION`).

    Every field the host reads is checked for presence and JSON type (extra fields are ignored):
    workflow code can influence what the realm serializes, and a forged or broken message must end
    the run with a clear protocol error.

    Raises:
        ProtocolError: ``msg`` is not a JSON object, has an unknown ``t``, or lacks a well-formed
            field (the message names it).
    """
    if not isinstance(msg, dict):
        raise ProtocolError("worker message is not a JSON object")
    t = msg.get("t")
    decoder = _DECODERS.get(t) if isinstance(t, str) else None
    if decoder is None:
        raise ProtocolError(f"unknown worker message type {t!r}")
    value: WorkerMessage = decoder(msg)
    return value


def check_worker_message(msg: Any) -> dict[str, Any]:
    """Return ``msg`` when it is a well-formed worker message (see :func:`decode_worker_message`),
    else raise :class:`ProtocolError` (a ``ValueError``) naming the problem."""
    decode_worker_message(msg)
    assert isinstance(msg, dict)
    return msg
