"""The one nesting rule for JSON values that cross workflow-mcp: :data:`MAX_VALUE_DEPTH`.

Python's :mod:`json` reader and writer recurse: a text nested past about 1,000 levels (a model's
reply ``[[[[…``, an agent program's output document) raises :class:`RecursionError`, which names no
rule and, left uncaught, ends a run with "maximum recursion depth exceeded". Every reader of JSON a
provider, a workflow or a client hands over goes through :func:`loads`, which turns that into
:class:`NestingError` (a :class:`ValueError`) naming the limit, so the caller's existing handling of
unreadable JSON applies and the message tells the writer what to change.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["MAX_VALUE_DEPTH", "NestingError", "loads", "top_level"]

MAX_VALUE_DEPTH: Final = 256
"""The deepest JSON value (arrays and objects; a scalar is 0 levels, ``[]`` is 1) that crosses between
the host, the realm and the store: run args (CLI, MCP, Python API), ``workflow()`` args, agent
options, results, recorded journal values and the final value. A workflow-mcp limit, not Claude's
(Claude Code passes values nested 28,000 and more): the host's JSON readers recurse, so the bound keeps
every face answering with a refusal that names it instead of overflowing a stack. The same under every
profile; the realm gets it in its start message."""


class NestingError(ValueError):
    """Raised by :func:`loads` when a JSON text nests deeper than Python's reader goes (far past
    :data:`MAX_VALUE_DEPTH`); its message names ``what`` and the limit."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"{what} is nested deeper than {MAX_VALUE_DEPTH} levels, the most workflow-mcp reads "
            "(MAX_VALUE_DEPTH); flatten it"
        )


def loads(text: str | bytes, *, what: str = "the JSON text", **options: Any) -> Any:
    """``json.loads(text, **options)``, except that a text too deeply nested to read raises
    :class:`NestingError` naming ``what`` (e.g. ``"the reply"``) instead of :class:`RecursionError`.

    Raises:
        NestingError: nested past what the reader can hold (always deeper than MAX_VALUE_DEPTH).
        ValueError: not JSON (:class:`json.JSONDecodeError`), or whatever a ``parse_*`` option raises.
    """
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise NestingError(what) from None


_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def top_level(text: str) -> dict[str, Any] | None:
    """The top level of a JSON object too deep for :func:`json.loads` (every nested array or object
    replaced by ``null``), to read its ``id`` or ``method`` and answer it; ``None`` when the text is
    not one JSON object. Iterative: any depth is scanned."""
    out, depth, kept = [], 0, 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth == 2:
                out.append(text[kept : match.start()] + "null")
        elif token in "]}":
            depth -= 1
            if depth == 1:
                kept = match.end()
    out.append(text[kept:])
    try:
        value = json.loads("".join(out))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
