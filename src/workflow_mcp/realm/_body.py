"""The body as Claude Code runs it, so stack positions in the realm count as Claude counts them.

Claude Code 2.1.332 (measured, NOTES.md#failed-run-positions) removes everything up to the end of the
meta statement, trims leading whitespace from the rest and runs it starting on line 2: a throw after
two blank lines below meta is reported on line 2, an indented first line loses its indentation from
the column. The realm compiles exactly that text (``workflow.js``, line 1 is its own wrapper), and
:class:`RunBody` says where it starts in the file, so a position can be named both ways.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunBody", "run_body"]

# What JavaScript's String.prototype.trimStart removes: WhiteSpace and LineTerminator (ECMA-262).
_JS_SPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_BREAKS = "\r\n\u2028\u2029"


@dataclass(frozen=True)
class RunBody:
    """``text`` is what runs (it starts on line 2); ``line``/``column`` (1-based, column in UTF-16 code
    units) are where its first character lies in the file."""

    text: str
    line: int
    column: int

    def to_start(self) -> dict[str, object]:
        """The fields of a realm ``start`` or ``child`` message: ``body``, ``bodyLine``, ``bodyColumn``."""
        return {"body": self.text, "bodyLine": self.line, "bodyColumn": self.column}


def run_body(source: str, body: str) -> RunBody:
    """The body of a loaded workflow as Claude runs it.

    ``body`` is the loader's executable body (``source`` with the meta statement, and a leading ``#!``
    line, blanked out character for character); the text after the meta statement is the same in both,
    so the meta statement ends where the two last differ.
    """
    end = 0
    if source != body:
        n, limit = 0, min(len(source), len(body))
        while n < limit and source[-1 - n] == body[-1 - n]:
            n += 1
        # The meta statement ends with `}` or `;`, blanked to a space; a body that is not the
        # loader's (tests hand the realm bodies of their own) runs trimmed, from its start.
        if n < len(source) and source[-1 - n] in "};" and body[len(body) - n - 1] == " ":
            end = len(body) - n
    start = end
    while start < len(body) and body[start] in _JS_SPACE:
        start += 1
    line, column = _position(body, start)
    return RunBody(text=body[start:], line=line, column=column)


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` as V8 counts: CR LF, CR, LF, U+2028, U+2029 end a line;
    columns in UTF-16 code units."""
    line, begin, i = 1, 0, 0
    while i < offset:
        ch = text[i]
        if ch in _BREAKS:
            if ch == "\r" and i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
            line += 1
            begin = i + 1
        i += 1
    units = sum(2 if ord(ch) > 0xFFFF else 1 for ch in text[begin:offset])
    return line, units + 1
