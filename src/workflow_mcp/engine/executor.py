"""The seam where a run hands one live agent call to its provider: :class:`AgentExecutor`.

The run coordinator decides everything about a call first (admission, the cap, the budget, replay,
the stall watchdog, schema re-asks); an executor only carries out one attempt and returns the
provider's answer. :class:`LocalExecutor` runs it in this process, on the run's event loop (every run
today); an executor that runs calls elsewhere (a Ray cluster) plugs in here, while the realm, the
journal and the event store stay with the coordinator, so a run's results and journal do not depend
on where its calls ran.
"""

from __future__ import annotations

from typing import Protocol

from ..providers.base import AgentContext, AgentProvider, AgentRequest, AgentResult

__all__ = ["AgentExecutor", "LocalExecutor"]


class AgentExecutor(Protocol):
    """Carries out one provider attempt of one live agent call."""

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        """The provider's answer to ``request``. ``context`` carries the call's cancel signal, its
        progress events (they reset the stall window) and its checkpoint hook; they must reach the
        provider unchanged. Raises what the provider raises (``AgentExecutionError`` and its kin,
        ``CancelledError`` when the run cancels the call)."""
        ...


class LocalExecutor:
    """Runs each call in this process, on the run's event loop."""

    async def execute(
        self, provider: AgentProvider, request: AgentRequest, context: AgentContext
    ) -> AgentResult:
        return await provider.execute(request, context)
