"""Retrying rate-limited and overloaded provider answers: bounded exponential backoff with jitter
that honours the backend's ``Retry-After``.

A provider reports such an answer as ``provider_failed`` with ``AgentResult.failure`` set to
``rate_limit`` or ``overloaded`` (HTTP 429, 529, "overloaded") and ``retry_after_s`` when the backend
said how long to wait. The engine asks again after :meth:`RetryPolicy.delay`, at most
``retries`` times; then the call resolves ``null`` like any provider failure (profile
claude-code/2.1.332: "provider/API failure, after the provider's own retries: null").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

__all__ = ["RETRYABLE", "RetryPolicy"]

RETRYABLE: Final = frozenset({"rate_limit", "overloaded"})
"""``AgentResult.failure`` values the engine retries."""


@dataclass(frozen=True)
class RetryPolicy:
    """How rate-limited calls are retried (workflow-mcp's defaults; ``[limits]`` in the
    configuration changes them).

    ``retries``: further attempts after the first (default 4; 0 turns retrying off). ``base_ms``:
    the first backoff (default 1,000 ms), doubled each retry up to ``max_ms`` (default 60,000 ms);
    the wait is drawn uniformly from the upper half of that step (jitter), so concurrent calls that
    were refused together do not come back together. A ``Retry-After`` the backend gave is waited in
    full (plus up to 10 % jitter); one longer than ``max_retry_after_ms`` (default 600,000 ms) is not
    waited for at all: the call fails at once with the backend's message.
    """

    retries: int = 4
    base_ms: int = 1_000
    max_ms: int = 60_000
    max_retry_after_ms: int = 600_000

    def delay(
        self, retry: int, retry_after_s: float | None, rng: random.Random | None = None
    ) -> float | None:
        """Seconds to wait before retry number ``retry`` (from 1), or ``None``: do not retry."""
        if retry > self.retries:
            return None
        draw: float = (rng or _RNG).random()
        if retry_after_s is not None and retry_after_s >= 0:
            if retry_after_s * 1000 > self.max_retry_after_ms:
                return None
            return retry_after_s * (1 + 0.1 * draw)
        step = min(self.max_ms, self.base_ms << min(retry - 1, 30)) / 1000
        return step / 2 + step / 2 * draw


_RNG = random.Random()
