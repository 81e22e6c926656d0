"""Credential-shaped text masked before it is shown: the prompt preview an ``agent.queued`` event
carries (:func:`prompt_preview`), which the run viewer shows in an agent's details.

A prompt is workflow data and may hold what its args held; the preview keeps the start of it, so a
person can tell calls apart, and masks what looks like a secret. The shapes (:data:`SECRET_SHAPES`)
are the published formats of common API keys and tokens plus ``name=value`` / ``name: value`` pairs
whose name says secret; a masked value reads ``[redacted]``. It is a courtesy against showing a key
by accident, not a guarantee: a secret of no known shape is shown as written.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["PREVIEW_SOURCE_CHARS", "PROMPT_PREVIEW_CHARS", "SECRET_SHAPES", "prompt_preview", "redact"]

PROMPT_PREVIEW_CHARS: Final = 300
"""Characters of a prompt its preview keeps (after masking; a longer prompt ends with ``…``)."""
_LOOKAHEAD: Final = 256
"""Characters past the preview's end that are searched too, so a secret the end cuts is masked whole
(the shapes that can be longer, a private key block and a JSON Web Token, also match when cut)."""
PREVIEW_SOURCE_CHARS: Final = PROMPT_PREVIEW_CHARS + _LOOKAHEAD + 1
"""How much of a prompt its preview depends on: ``prompt_preview(p[:PREVIEW_SOURCE_CHARS]) ==
prompt_preview(p)`` for every prompt ``p``."""

SECRET_SHAPES: Final[tuple[tuple[str, str], ...]] = (
    (
        "private key block",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    ),
    ("OpenAI / Anthropic API key", r"\bsk-[A-Za-z0-9_-]{16,}"),
    ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("JSON Web Token", r"\beyJ[A-Za-z0-9_-]{8,}(?:(?:\.[A-Za-z0-9_-]*){1,2}|$)"),
    ("bearer credential", r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{12,}"),
    (
        "secret-named value",
        r"(?i)(?P<keep>\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret)"
        r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{4,}",
    ),
)
"""``(what, regular expression)`` of each masked shape, in the order they are applied; a group named
``keep`` is the text before the secret (its name), shown as written."""

_MARKERS: Final[dict[str, tuple[str, ...]]] = {
    "private key block": ("private key",),
    "OpenAI / Anthropic API key": ("sk-",),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "AWS access key id": ("akia", "asia"),
    "Slack token": ("xox",),
    "Google API key": ("aiza",),
    "JSON Web Token": ("eyj",),
    "bearer credential": ("bearer",),
    "secret-named value": ("pass", "pwd", "secret", "token", "key"),
}
"""Text (lower case) without which a shape cannot match: a prompt is searched for a shape only when it
holds one of these, so a prompt with nothing secret-like costs a few substring tests per call."""
_SHAPES: Final = tuple((_MARKERS[name], re.compile(pattern)) for name, pattern in SECRET_SHAPES)
_ANY_MARKER: Final = re.compile("|".join(re.escape(m) for markers in _MARKERS.values() for m in markers))
"""Any marker at all: one search, so a prompt with none (most) is passed over in a single scan."""


def redact(text: str) -> str:
    """``text`` with every match of :data:`SECRET_SHAPES` replaced by ``[redacted]``."""
    lowered = text.lower()
    if _ANY_MARKER.search(lowered) is None:
        return text
    for markers, shape in _SHAPES:
        for marker in markers:  # plain loops: a generator per shape cost more than the tests
            if marker in lowered:
                text = shape.sub(_mask, text)
                break
    return text


def _mask(match: re.Match[str]) -> str:
    keep = match.groupdict().get("keep")
    return (keep or "") + "[redacted]"


def prompt_preview(prompt: str, limit: int = PROMPT_PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of ``prompt`` with secrets masked (:func:`redact`); a longer
    prompt is cut to ``limit`` characters ending with ``…``."""
    text = redact(prompt[: limit + _LOOKAHEAD])
    return text if len(text) <= limit and len(prompt) <= limit + _LOOKAHEAD else text[: limit - 1] + "…"
