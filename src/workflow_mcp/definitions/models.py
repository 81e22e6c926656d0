"""Model and effort names, normalized exactly as Claude Code 2.1.332 normalizes agent() options and
agent-definition frontmatter before anything routes on them (measured with the oracle, cases
``model-names-normalized``, ``model-non-string-throws``, ``effort-names-normalized``,
``agents-frontmatter-model``; table in ``tests/conformance/pending/NOTES.md#model-names``).

``model`` (:func:`normalize_model`):

1. ``null``/``undefined`` → no model (the run's default); any other non-string refuses the call with
   a ``TypeError`` (an option) or means no model (frontmatter);
2. exactly ``'inherit'`` (before trimming: ``'inherit '`` and ``'INHERIT'`` are names) → no model;
3. trimmed as JavaScript trims; ``''`` → no model;
4. a trailing ``[<digits>m]`` (``[1m]``, ``[1M]``) is dropped;
5. ``haiku``, ``sonnet``, ``opus`` in any letter case → that alias, ``best`` → ``opus``,
   ``opusplan`` → ``sonnet`` (outside plan mode); any other name stays as written.

Routing rules and ``[providers.X.models]`` see the result. Claude also remaps some retired full model
ids to its current ones (``claude-opus-4-1`` → the current opus): that is Claude's model catalogue,
not workflow semantics, and is left to each provider.

``effort`` (:func:`normalize_effort`): ``String(v).toLowerCase()`` when that is one of the profile's
efforts (low, medium, high, xhigh, max), else none — a number or a numeric string sends no effort at
all (:func:`is_numeric_effort`: not even the agent definition's), anything else is ignored (the
definition's applies); never an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Final

from ..errors import AgentCallRefusedError

__all__ = [
    "MODEL_ALIASES",
    "ModelNameError",
    "is_numeric_effort",
    "js_string",
    "normalize_effort",
    "normalize_model",
]

MODEL_ALIASES: Final = {
    "haiku": "haiku",
    "sonnet": "sonnet",
    "opus": "opus",
    "best": "opus",
    "opusplan": "sonnet",
}
"""Case-insensitive model names and the alias each stands for (profile claude-code/2.1.332)."""

# String.prototype.trim: ECMAScript WhiteSpace and LineTerminator code points.
_JS_SPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_CONTEXT_SUFFIX: Final = re.compile(r"\[\d+m\]\Z", re.IGNORECASE)


class ModelNameError(AgentCallRefusedError):
    """Raised when an agent() ``model`` option is neither a string nor ``null``/``undefined``: the
    call rejects before any provider is contacted with an error named ``TypeError``. The first line
    of the message is Claude Code 2.1.332's own (a JavaScript engine accident that workflows may test
    for); the second names the fix."""

    js_name = "TypeError"

    def __init__(self, value: Any) -> None:
        self.value = value
        super().__init__(
            "e.toLowerCase is not a function. (In 'e.toLowerCase()', 'e.toLowerCase' is undefined)\n"
            f"agent() option model must be a string such as 'sonnet' (got {_kind(value)}); pass a model "
            "name, or leave model out for the run's default model"
        )


def normalize_model(value: Any, *, strict: bool = True) -> str | None:
    """The model name ``value`` stands for (module docstring), or ``None`` for the run's default model.

    ``value`` is a JSON value as it crossed the realm boundary. ``strict`` (an agent() option): a
    non-string raises; otherwise (agent-definition frontmatter) it means the default model.

    Raises:
        ModelNameError: ``strict`` and ``value`` is a number, boolean, array or object.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        if strict:
            raise ModelNameError(value)
        return None
    if value == "inherit":
        return None
    name = _CONTEXT_SUFFIX.sub("", value.strip(_JS_SPACE))
    if not name:
        return None
    return MODEL_ALIASES.get(name.lower(), name)


def normalize_effort(value: Any, efforts: Iterable[str]) -> str | None:
    """``String(value).toLowerCase()`` when it is one of ``efforts`` (the profile's), else ``None``
    (module docstring). Never raises."""
    if value is None:
        return None
    name = js_string(value).lower()
    return name if name in tuple(efforts) else None


def is_numeric_effort(value: Any) -> bool:
    """Whether an effort is a number (finite) or a string spelling one (``5``, ``'5'``, ``1.5``,
    ``-1``): Claude then sends no effort at all, not even an agent definition's (measured, case
    ``agents-option-fallbacks``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    return isinstance(value, str) and _NUMERIC.fullmatch(value) is not None


_NUMERIC: Final = re.compile(r"-?\d+(?:\.\d+)?")


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for a JSON value: ``null`` → ``'null'``, booleans ``'true'``/
    ``'false'``, numbers as JavaScript prints them (``1e21`` → ``'1e+21'``, ``1.5`` → ``'1.5'``),
    arrays joined by ``,`` (``null`` items empty), objects ``'[object Object]'``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_number(value: float) -> str:
    """``Number.prototype.toString()`` (ECMAScript Number::toString, radix 10) of ``value``."""
    if isinstance(value, int) and abs(value) < 10**21:
        return str(value)
    x = float(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(x))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    k = len(digits)
    n = exponent + len(digit_tuple)  # the value is 0.<digits> × 10**n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object"
