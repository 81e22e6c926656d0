"""The closed, versioned message protocol between the host and the realm worker (JSON lines).

Protocol version 2. Every line is one JSON object with a ``t`` (type) field.

Worker → host:
    hello     {protocol, node}                                   first line after spawn
    call      {id, fn: "agent", prompt, opts, label, phase, child, key, canon}
              {id, fn: "workflow", target: {name}|{scriptPath}}  (the args stay in the realm)
    phase     {title}                                            phase() in the top-level workflow
    log       {message, child}                                   log(), child = child workflow name
    console   {level, message}                                   reserved (console.* lines arrive as ``log``)
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
               maxFanoutItems, boundary: {childDepth, finalDepth, childErrorMessageIsStack}, profile,
               cacheKeyOptions, flatCacheChain, logLine, logLimit, maxValueDepth}
    result    {id, r: {ok, value? | error: {name, message, code?}, spent?}}
    child     {id, name, phase, body, bodyLine, bodyColumn, filename, spent}   a resolved nested workflow
    budget    {total, spent}
    batch     {items: [result | child | budget]}             several answers, one microtask flush
    check     {id, sources}
    collate   {id, names}
    stop      {}
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["HOST_MESSAGE_TYPES", "PROTOCOL_VERSION", "WORKER_MESSAGE_TYPES", "check_worker_message"]

PROTOCOL_VERSION: Final = 2

WORKER_MESSAGE_TYPES: Final = frozenset(
    {
        "hello",
        "call",
        "phase",
        "log",
        "console",
        "child",
        "dropped",
        "returned",
        "done",
        "checked",
        "collated",
    }
)
HOST_MESSAGE_TYPES: Final = frozenset(
    {"start", "result", "child", "budget", "batch", "check", "collate", "stop"}
)


_STR = (str,)
_OPT_STR = (str, type(None))
_INT = (int,)

# Required fields of each worker message and the JSON types they may hold (extra fields are allowed).
_FIELDS: Final[dict[str, dict[str, tuple[type, ...]]]] = {
    "hello": {"protocol": _INT, "node": _STR},
    "phase": {"title": _STR},
    "log": {"message": _STR, "child": _OPT_STR},
    "console": {"level": _STR, "message": _STR},
    "child": {"name": _STR, "ok": (bool,)},
    "dropped": {"lines": _INT},
    "done": {"ok": (bool,)},
    "checked": {"id": _INT, "results": (list,)},
    "collated": {"id": _INT, "names": (list,)},
}
_CALL_FIELDS: Final[dict[str, dict[str, tuple[type, ...]]]] = {
    "agent": {
        "id": _INT,
        "prompt": _STR,
        "opts": (dict,),
        "label": _STR,
        "phase": _OPT_STR,
        "child": _OPT_STR,
        "key": _STR,
        "canon": _STR,
    },
    "workflow": {"id": _INT, "target": (dict,)},
}


def check_worker_message(msg: Any) -> dict[str, Any]:
    """Return ``msg`` when it is a well-formed worker message, else raise ``ValueError`` naming the
    problem. Every field the host reads is checked for presence and JSON type: workflow code can
    influence what the realm serializes, and a forged or broken message must end the run with a clear
    protocol error, never a ``KeyError`` deep in the host."""
    if not isinstance(msg, dict):
        raise ValueError("worker message is not a JSON object")
    t = msg.get("t")
    if t not in WORKER_MESSAGE_TYPES:
        raise ValueError(f"unknown worker message type {t!r}")
    if t == "call":
        fields = _CALL_FIELDS.get(msg.get("fn"))  # type: ignore[arg-type]
        if fields is None:
            raise ValueError(f"unknown call {msg.get('fn')!r}")
    else:
        fields = _FIELDS.get(t, {})
    for name, types in fields.items():
        value = msg.get(name, _ABSENT)
        if value is _ABSENT or not isinstance(value, types) or (types == _INT and isinstance(value, bool)):
            raise ValueError(f"a {t!r} message without a well-formed {name!r}")
    if t == "call" and msg["fn"] == "workflow":
        target = msg["target"]
        if not (isinstance(target.get("name"), str) or isinstance(target.get("scriptPath"), str)):
            raise ValueError("a workflow() call without a name or scriptPath")
        if "args" in msg and not isinstance(msg["args"], str):
            raise ValueError("a workflow() call whose args are not JSON text")
    elif t == "child" and "message" in msg and not isinstance(msg["message"], str):
        raise ValueError("a 'child' message whose message is not text")
    elif t == "done":
        _check_done(msg)
    return msg


_ABSENT: Final = object()


def _check_done(msg: dict[str, Any]) -> None:
    if msg["ok"]:
        if not isinstance(msg.get("value"), str):
            raise ValueError("a 'done' message without its value as JSON text")
        return
    error = msg.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("name"), str):
        raise ValueError("a failed 'done' message without a well-formed error")
    if not isinstance(error.get("message"), str):
        raise ValueError("a failed 'done' message whose error has no message text")
    if "stack" in error and not isinstance(error["stack"], str):
        raise ValueError("a failed 'done' message whose stack is not text")
