"""Where tree-sitter and V8 could read one source differently, V8 decides or the file is refused.

Private. The loader's static checks (``import()``, ``await using``, the meta statement) read the
tree-sitter syntax tree, but the realm runs what V8 reads. The two lexers disagree on a few
constructs: V8 compiles workflows in the Script goal, where ``<!--`` and a ``-->`` at the start of a
line open HTML-like comments (ECMAScript Annex B.1.1), while tree-sitter and Claude Code's loader read
them as operators; and a grammar gap can leave tree-sitter reading code as a template, a string or a
comment. Such a disagreement must never hide code from the checks.

So every occurrence of a security-relevant word (``import``, ``using``) that tree-sitter places inside
a string, template, regular expression or comment, and every ``<!--`` or line-leading ``-->`` that
tree-sitter does not already see, becomes a *mark*: V8 compiles the body once more with each mark
overwritten by ``@#`` characters. ``@`` is an error wherever V8 reads code and harmless inside any
literal or comment, and the text before the first mark is unchanged, so the marked body compiles
exactly when V8 also reads every mark as inert; otherwise V8's error sits on the first mark it reads as
code, and that mark names the rule that refuses the file.

Measured with the oracle (claude-code/2.1.332 and 2.1.209): Claude Code's loader refuses
``const x = 1 <!-- 2`` and a line-leading ``--> note`` as parse errors (it has no HTML-like comments);
U+2028 and U+2029 end a ``//`` comment there as in V8; a ``#!`` line at the very start of the file is
accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node

    from workflow_mcp.definitions._js import Source

__all__ = ["Mark", "StaticFinding", "find_marks", "marked_text"]

# Candidate tokens in the raw bytes; the tree (and then V8) decide what each one is.
_CANDIDATES = re.compile(rb"\bimport\b|\busing\b|<!--|-->")
# Node types whose text is never code: what a mark inside one of them means is "tree-sitter reads text".
_INERT = frozenset(
    {
        "comment",
        "html_comment",
        "hash_bang_line",
        "string",
        "string_fragment",
        "escape_sequence",
        "template_string",
        "regex",
        "regex_pattern",
        "regex_flags",
    }
)
# Code tokens a word may legitimately be (a property name, a longer identifier, the keyword itself).
_LINE_BREAKS = (b"\n", b"\r", "\u2028".encode(), "\u2029".encode())
_LINE_LEAD = re.compile(r"^(?:.*?\*/)?(?:\s|/\*.*?\*/)*$", re.DOTALL)


@dataclass(frozen=True)
class Mark:
    """A byte range ``[start, end)`` of the raw source that V8 must read as inert text.

    ``kind`` is ``import``, ``using``, ``html-open`` or ``html-close``; it chooses the rule that
    refuses the file when V8 reads the mark as code.
    """

    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class StaticFinding:
    """A refusal tree-sitter alone can make: an HTML-like comment it reads as code or as a comment."""

    rule: str
    kind: str
    start: int


def find_marks(
    root: Node, src: Source, *, meta_range: tuple[int, int] | None, import_refused: bool
) -> tuple[list[Mark], list[StaticFinding]]:
    """The marks V8 must confirm, and the HTML-like comments tree-sitter itself sees.

    ``meta_range`` is the byte range of the meta statement (it is blanked out of the body, so nothing
    inside it needs V8's confirmation). Inside a region tree-sitter could not parse, an ``import(``
    that is not a property access becomes an ``import-call`` mark when the profile refuses ``import()``
    at load (``import_refused``): if V8 reads it as code, it is a real dynamic import. Linear in the
    number of candidates.
    """
    data = src.data
    marks: list[Mark] = []
    static: list[StaticFinding] = []
    for match in _CANDIDATES.finditer(data):
        start, end = match.start(), match.end()
        if meta_range is not None and meta_range[0] <= start < meta_range[1]:
            continue
        token = match.group()
        node = root.descendant_for_byte_range(start, end)
        inert = node is not None and _is_inert(node)
        if token in (b"import", b"using"):
            if inert and data[max(0, start - 3) : start] in (b"(?<", b"\\k<"):
                continue  # a regex group name: code could never read `(?<` or `\k<`
            if inert:
                marks.append(Mark(start, end, token.decode()))
            elif token == b"import" and node is not None and _in_error(node):
                word = _code_word(data, start, end)
                if word is None:
                    marks.append(Mark(start, end, "import"))
                elif word == "call" and import_refused:
                    marks.append(Mark(start, end, "import-call"))
            continue
        if token == b"<!--":
            if inert:
                marks.append(Mark(start, end, "html-open"))
            else:
                static.append(StaticFinding("html-comment", "html-open", start))
            continue
        # `-->`: tree-sitter's own HTML-like comment, text V8 must confirm, or operators — which V8
        # reads as a comment where they lead a line of the body (after blanks, block comments and the
        # blanked meta statement).
        if node is not None and node.type == "html_comment" and node.start_byte == start:
            static.append(StaticFinding("html-comment", "html-close", start))
        elif inert:
            marks.append(Mark(start, end, "html-close"))
        elif _leads_line(data, start, meta_range):
            static.append(StaticFinding("html-comment", "html-close", start))
    return marks, static


def marked_text(data: bytes, marks: list[Mark]) -> bytes:
    """``data`` with every mark overwritten by ``@#@#…`` (same length, so every position stays put).

    ``@`` is an error wherever V8 reads code; alternating it with ``#`` never forms one of the doubled
    punctuators a ``v``-flag character class reserves, so inside any literal the mark stays harmless.
    """
    out = bytearray(data)
    for mark in marks:
        n = mark.end - mark.start
        out[mark.start : mark.end] = (b"@#" * n)[:n]
    return bytes(out)


def _is_inert(node: Node) -> bool:
    # The smallest node holding the whole candidate: inside a literal or comment only if that node
    # (or a node it lies in, up to the nearest statement) is one of the inert kinds.
    current: Node | None = node
    while current is not None:
        if current.type in _INERT:
            return True
        if current.type == "template_substitution" or current.is_error:
            return False
        if current.type.endswith(("statement", "declaration")) or current.type == "program":
            return False
        current = current.parent
    return False


def _in_error(node: Node) -> bool:
    current: Node | None = node
    while current is not None:
        if current.is_error or current.is_missing:
            return True
        current = current.parent
    return False


def _code_word(data: bytes, start: int, end: int) -> str | None:
    # Inside a region tree-sitter could not parse: `x.import` and `{ import: 1 }` are property names
    # and `import(` a call, all code V8 accepts; anything else V8 compiled must be text, which a mark
    # confirms.
    before = data[max(0, start - 64) : start].rstrip()
    after = data[end : end + 64].lstrip()
    if before.endswith(b".") or after.startswith(b":"):
        return "property"
    if after.startswith(b"("):
        return "call"
    return None


def _leads_line(data: bytes, start: int, meta_range: tuple[int, int] | None) -> bool:
    line_start = 0
    for brk in _LINE_BREAKS:
        at = data.rfind(brk, 0, start)
        if at >= 0:
            line_start = max(line_start, at + len(brk))
    raw = bytearray(data[line_start:start])
    if meta_range is not None:  # the body holds blanks where the meta statement was
        lo, hi = max(meta_range[0], line_start), min(meta_range[1], start)
        if lo < hi:
            raw[lo - line_start : hi - line_start] = b" " * (hi - lo)
    prefix = bytes(raw).decode("utf-8", errors="replace")
    return _LINE_LEAD.match(prefix) is not None
