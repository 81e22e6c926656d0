"""Agent providers: the :class:`AgentProvider` seam and its implementations.

``FakeProvider`` is the deterministic in-memory provider that ships with the package, so users can
test their own workflows without a model (conformance README, "The fake provider script").
"""

from __future__ import annotations

from .base import (
    AgentContext,
    AgentExecutionError,
    AgentProvider,
    AgentRequest,
    AgentResult,
    AgentStalledError,
    CancelSignal,
    ProviderCapabilities,
    ProviderEvent,
    TokenUsage,
)
from .fake import FakeProvider

__all__ = [
    "AgentContext",
    "AgentExecutionError",
    "AgentProvider",
    "AgentRequest",
    "AgentResult",
    "AgentStalledError",
    "CancelSignal",
    "FakeProvider",
    "ProviderCapabilities",
    "ProviderEvent",
    "TokenUsage",
]
