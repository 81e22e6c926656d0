"""Regular expressions from untrusted text, matched with a time limit.

Workflows (JSON-schema ``pattern`` keywords) and clients (a fake script's ``prompt`` rule, sent over
MCP) supply regular expressions. Python's ``re`` cannot be interrupted, so one catastrophic pattern
(``(a+)+$`` against ``aaaa…!``) would hold the event loop — and every other client — for as long as it
backtracks. These patterns are compiled with the ``regex`` package instead and every match runs
under :data:`MATCH_TIMEOUT_S`; past it, :class:`PatternTimeoutError` names the pattern and the limit.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from .errors import InvalidInputError

__all__ = ["MATCH_TIMEOUT_S", "BoundedPattern", "PatternTimeoutError", "compile_bounded"]

#: workflow-mcp limit: the longest one match of an untrusted pattern may take, in seconds.
MATCH_TIMEOUT_S: Final = 0.1


class PatternTimeoutError(InvalidInputError):
    """Raised when matching an untrusted regular expression takes longer than the time limit."""

    def __init__(self, pattern: str, timeout_s: float = MATCH_TIMEOUT_S) -> None:
        shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
        super().__init__(
            f"the regular expression {shown!r} took longer than {timeout_s * 1000:.0f} ms to match "
            "(workflow-mcp limit on untrusted patterns): it backtracks catastrophically; rewrite it "
            "without nested quantifiers such as (a+)+"
        )
        self.pattern = pattern


class BoundedPattern:
    """A compiled pattern whose ``search``/``fullmatch`` raise :class:`PatternTimeoutError` instead of
    running longer than ``timeout_s``."""

    __slots__ = ("_compiled", "pattern", "timeout_s")

    def __init__(self, compiled: Any, pattern: str, timeout_s: float) -> None:
        self._compiled = compiled
        self.pattern = pattern
        self.timeout_s = timeout_s

    def search(self, text: str) -> bool:
        """True when the pattern occurs anywhere in ``text``.

        Raises:
            PatternTimeoutError: matching took longer than ``timeout_s``.
        """
        try:
            return self._compiled.search(text, timeout=self.timeout_s) is not None
        except TimeoutError:
            raise PatternTimeoutError(self.pattern, self.timeout_s) from None

    def fullmatch(self, text: str) -> bool:
        """True when the pattern matches the whole of ``text``.

        Raises:
            PatternTimeoutError: matching took longer than ``timeout_s``.
        """
        try:
            return self._compiled.fullmatch(text, timeout=self.timeout_s) is not None
        except TimeoutError:
            raise PatternTimeoutError(self.pattern, self.timeout_s) from None


def compile_bounded(
    pattern: str, *, dotall: bool = False, timeout_s: float = MATCH_TIMEOUT_S
) -> BoundedPattern:
    """Compile ``pattern`` (Python ``re`` syntax) for time-limited matching.

    Raises:
        ValueError: the pattern does not compile (the message says why).
    """
    return BoundedPattern(_compile(pattern, dotall), pattern, timeout_s)


@lru_cache(maxsize=512)
def _compile(pattern: str, dotall: bool) -> Any:
    import regex

    try:
        return regex.compile(pattern, regex.V0 | (regex.DOTALL if dotall else 0))
    except regex.error as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("the pattern is nested too deeply to compile") from None
