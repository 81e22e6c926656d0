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
               cacheKeyOptions}
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
    {"hello", "call", "phase", "log", "console", "child", "returned", "done", "checked", "collated"}
)
HOST_MESSAGE_TYPES: Final = frozenset(
    {"start", "result", "child", "budget", "batch", "check", "collate", "stop"}
)


def check_worker_message(msg: Any) -> dict[str, Any]:
    """Return ``msg`` when it is a known worker message, else raise ``ValueError`` naming the problem."""
    if not isinstance(msg, dict):
        raise ValueError("worker message is not a JSON object")
    t = msg.get("t")
    if t not in WORKER_MESSAGE_TYPES:
        raise ValueError(f"unknown worker message type {t!r}")
    return msg
