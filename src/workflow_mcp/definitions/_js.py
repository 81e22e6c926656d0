"""JavaScript source access for the loader: the cached tree-sitter parser, positions and literal decoding.

Private. Positions are 1-based lines and 1-based columns counted in UTF-16 code units, the unit V8
and the Language Server Protocol use, so a column from tree-sitter and one from the realm's syntax
check point at the same character.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Tree

__all__ = [
    "EscapeError",
    "Source",
    "decode_identifier",
    "decode_string",
    "is_bigint",
    "is_legacy_octal",
    "next_leaf",
    "number_key",
    "parse",
    "prev_leaf",
]

_local = threading.local()


def _parser() -> Parser:
    # A Parser is not safe to share between threads; one per thread, built on first use so that
    # importing the package never pays for tree-sitter.
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter
        import tree_sitter_javascript

        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))
        _local.parser = parser
    return parser


def parse(data: bytes) -> Tree:
    """Parse UTF-8 ``data`` as JavaScript (tree-sitter-javascript grammar)."""
    return _parser().parse(data)


class Source:
    """The UTF-8 bytes of one source with position helpers.

    :meth:`position` costs O(log n) after a one-time O(n) index (built on first use), so reporting a
    position for each of 20,000 meta keys on one line stays linear in the file's size.
    """

    __slots__ = ("_continuation", "_wide", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        # Byte offsets of UTF-8 continuation bytes and of 4-byte sequence leads; None until needed
        # (and both stay empty for ASCII sources).
        self._continuation: list[int] | None = None
        self._wide: list[int] = []

    def text(self, node: Node) -> str:
        """The source text of ``node``."""
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="surrogatepass")

    def position(self, node: Node) -> tuple[int, int]:
        """``(line, column)`` of the start of ``node``, both 1-based, column in UTF-16 code units."""
        row, byte_col = node.start_point
        return row + 1, self._units(node.start_byte - byte_col, node.start_byte) + 1

    def offset_position(self, offset: int) -> tuple[int, int]:
        """``(line, column)`` of byte ``offset`` (lines split at LF, as tree-sitter counts them).

        Works on bytes that are not valid UTF-8 too (the ``not-utf8`` error): each undecodable byte
        counts as one column. O(n); used once per file."""
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        prefix = self.data[line_start:offset].decode("utf-8", errors="replace")
        column = len(prefix) + sum(1 for ch in prefix if ord(ch) > 0xFFFF) + 1
        return self.data.count(b"\n", 0, offset) + 1, column

    def _units(self, start: int, end: int) -> int:
        """UTF-16 code units in the valid UTF-8 bytes ``data[start:end]``: one per byte that is not a
        continuation byte, plus one more per 4-byte sequence (a surrogate pair)."""
        if self._continuation is None:
            if self.data.isascii():
                self._continuation = []
            else:
                self._continuation = [m.start() for m in _CONTINUATION.finditer(self.data)]
                self._wide = [m.start() for m in _WIDE_LEAD.finditer(self.data)]
        count = end - start
        if self._continuation:
            count -= bisect_left(self._continuation, end) - bisect_left(self._continuation, start)
            count += bisect_left(self._wide, end) - bisect_left(self._wide, start)
        return count


_CONTINUATION = re.compile(rb"[\x80-\xbf]")
_WIDE_LEAD = re.compile(rb"[\xf0-\xf7]")


def prev_leaf(node: Node) -> Node | None:
    """The token before ``node`` in source order, skipping comments."""
    current: Node | None = node
    while current is not None:
        sibling = current.prev_sibling
        while sibling is not None and sibling.type == "comment":
            sibling = sibling.prev_sibling
        if sibling is not None:
            while sibling.child_count:
                sibling = sibling.children[-1]
            return sibling
        current = current.parent
    return None


def next_leaf(node: Node) -> Node | None:
    """The token after ``node`` in source order, skipping comments."""
    current: Node | None = node
    while current is not None:
        sibling = current.next_sibling
        while sibling is not None and sibling.type == "comment":
            sibling = sibling.next_sibling
        if sibling is not None:
            while sibling.child_count:
                sibling = sibling.children[0]
            return sibling
        current = current.parent
    return None


class EscapeError(ValueError):
    """An escape sequence that strict-mode JavaScript refuses; ``offset`` indexes the literal body."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_HEX = frozenset("0123456789abcdefABCDEF")


def decode_string(body: str, *, template: bool = False) -> str:
    """Decode the body of a string literal (without quotes) or of a template without substitutions.

    Follows ECMAScript strict-mode string values: ``\\n``-style escapes, ``\\xHH``, ``\\uHHHH`` (a
    surrogate pair of two escapes becomes one character), ``\\u{H…}``, ``\\0`` not followed by a
    digit, line continuations, and identity escapes. Templates give the cooked value, with raw CR LF
    and CR normalized to LF.

    Raises:
        EscapeError: for legacy octal escapes, ``\\8``/``\\9`` and malformed hex or Unicode escapes
            (all SyntaxErrors in module code).
    """
    if "\\" not in body and not (template and "\r" in body):
        return body
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        j = body.find("\\", i)
        raw = body[i:] if j < 0 else body[i:j]
        if template and "\r" in raw:
            raw = raw.replace("\r\n", "\n").replace("\r", "\n")
        out.append(raw)
        if j < 0:
            break
        i = j + 1
        if i >= n:
            raise EscapeError("a backslash ends the literal", j)
        c = body[i]
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
            i += 1
        elif c == "\r":
            i += 2 if body.startswith("\n", i + 1) else 1
        elif c in "\n\u2028\u2029":
            i += 1
        elif c == "0" and not (i + 1 < n and "0" <= body[i + 1] <= "9"):
            out.append("\0")
            i += 1
        elif "0" <= c <= "9":
            raise EscapeError(
                f"the escape \\{c} is a legacy octal or non-octal escape, which strict-mode code refuses; "
                "write \\x or \\u escapes instead",
                j,
            )
        elif c == "x":
            digits = body[i + 1 : i + 3]
            if len(digits) != 2 or not _HEX.issuperset(digits):
                raise EscapeError("\\x must be followed by exactly two hex digits", j)
            out.append(chr(int(digits, 16)))
            i += 3
        elif c == "u":
            if body.startswith("{", i + 1):
                close = body.find("}", i + 2)
                digits = body[i + 2 : close] if close >= 0 else ""
                if not digits or not _HEX.issuperset(digits) or int(digits, 16) > 0x10FFFF:
                    raise EscapeError("\\u{…} must hold 1 or more hex digits up to 10FFFF", j)
                out.append(chr(int(digits, 16)))
                i = close + 1
            else:
                digits = body[i + 1 : i + 5]
                if len(digits) != 4 or not _HEX.issuperset(digits):
                    raise EscapeError("\\u must be followed by four hex digits or {…}", j)
                out.append(chr(int(digits, 16)))
                i += 5
        else:
            out.append(c)
            i += 1
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        # Join escaped surrogate pairs into one character, as JavaScript's UTF-16 strings do.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def decode_identifier(text: str) -> str:
    """An identifier's name with ``\\uHHHH`` / ``\\u{…}`` escapes decoded (``m\\u0065ta`` is ``meta``)."""
    if "\\" not in text:
        return text
    try:
        return decode_string(text)
    except EscapeError:
        return text


def is_bigint(number_text: str) -> bool:
    """True for a BigInt literal such as ``10n`` or ``0x1Fn``."""
    return number_text.endswith("n")


_LEGACY_OCTAL = re.compile(r"0[0-9_]")


def is_legacy_octal(number_text: str) -> bool:
    """True for ``017`` or ``08``-style literals, which module (strict) code refuses."""
    return _LEGACY_OCTAL.match(number_text) is not None


_EXPONENT = re.compile(r"e([+-])0*(\d)")


def number_key(number_text: str) -> str:
    """The property name a numeric literal key produces (``1e3`` → ``"1000"``, ``0x10`` → ``"16"``)."""
    t = number_text.replace("_", "")
    if t.endswith("n"):
        t = t[:-1]
    try:
        if t[:2].lower() in ("0x", "0o", "0b"):
            return str(int(t, 0))
        value = float(t)
    except ValueError:
        return number_text
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return _EXPONENT.sub(r"e\1\2", repr(value))
