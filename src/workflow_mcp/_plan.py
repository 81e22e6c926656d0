"""The cost preview of a run (``workflow-mcp plan``, MCP ``workflow_plan``): what
:meth:`~workflow_mcp.service.WorkflowService.plan` reports, and how it estimates tokens.

A preview is a dry run on the synthesizing fake provider
(:class:`~workflow_mcp.providers.planning.PlanningProvider`): nothing is recorded, no agent starts. Each
call's tokens come, in order, from a fake script's ``tokens``; from past runs of the same workflow in the
store (:func:`read_history`: the average of the live calls with the same label, else of all its live
calls); else from the per-model defaults of ``[estimates]``
(:mod:`~workflow_mcp.providers.estimates`). Costs use the prices of the model the call is routed to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .engine.run import CallCounts
from .events import Event
from .providers.base import AgentRequest, TokenUsage
from .providers.estimates import Estimates
from .providers.planning import PlannedCall, PlannedRoute
from .store.base import RunStore

__all__ = ["History", "PlanReport", "TokenEstimator", "build_report", "read_history"]

#: How many of a workflow's newest runs inform a preview.
HISTORY_RUNS = 20
#: How many recent runs are scanned for them (the store has no index by workflow name).
HISTORY_SCAN = 1_000
NO_PHASE = "(no phase)"


@dataclass
class _Mean:
    calls: int = 0
    input: int = 0
    output: int = 0

    def add(self, tokens: Mapping[str, int]) -> None:
        self.calls += 1
        self.input += int(tokens.get("input", 0))
        self.output += int(tokens.get("output", 0))

    def usage(self) -> TokenUsage:
        return TokenUsage(input=round(self.input / self.calls), output=round(self.output / self.calls))


@dataclass
class History:
    """Token usage of a workflow's past live calls: ``runs`` runs, ``calls`` calls in all."""

    runs: int = 0
    by_label: dict[str, _Mean] = field(default_factory=dict)
    overall: _Mean = field(default_factory=_Mean)

    @property
    def calls(self) -> int:
        return self.overall.calls


def read_history(store: RunStore, workflow_name: str, *, include_fake: bool) -> History:
    """The live calls (completed, not replayed, with token usage) of the newest :data:`HISTORY_RUNS`
    runs of ``workflow_name`` in ``store``. Runs on the fake provider count only when ``include_fake``
    (their tokens are whatever a script said)."""
    history = History()
    runs = [
        r
        for r in store.list_runs(HISTORY_SCAN)
        if r.workflow_name == workflow_name and (include_fake or r.provider != "fake")
    ][:HISTORY_RUNS]
    for record in runs:
        used = False
        for row in store.journal(record.run_id):
            if row.status != "completed" or not (row.tokens.get("input") or row.tokens.get("output")):
                continue
            history.by_label.setdefault(row.label, _Mean()).add(row.tokens)
            history.overall.add(row.tokens)
            used = True
        history.runs += used
    return history


class TokenEstimator:
    """``(usage, basis)`` of one planned call: the history of its label, else of its workflow, else the
    estimates of the model it is routed to (``basis``: ``history`` or ``defaults``)."""

    def __init__(self, history: History, estimates: Estimates) -> None:
        self.history = history
        self.estimates = estimates

    def __call__(self, request: AgentRequest, route: PlannedRoute) -> tuple[TokenUsage, str]:
        mean = self.history.by_label.get(request.label)
        if mean is None and self.history.calls:
            mean = self.history.overall
        if mean is not None:
            return mean.usage(), "history"
        e = self.estimates.for_model(route.model, request.model)
        return TokenUsage(input=e.input_tokens or 0, output=e.output_tokens or 0), "defaults"


@dataclass(frozen=True)
class PlanReport:
    """A run's cost preview. ``agent_calls``: agent() calls that would reach a provider (a schema re-ask
    is not a new call); ``refused_calls``: calls refused before any provider (they count toward the
    cap); ``by_phase``: calls per phase; ``by_provider``: per provider, its calls, models, tokens and
    cost; ``estimated_tokens`` / ``estimated_cost_usd`` (``None`` when a call's model has no price);
    ``cap`` and ``budget``: whether the run would reach them; ``dry_run``: how the dry run ended;
    ``problems``: what would refuse calls before they run (an unmapped model alias, …)."""

    workflow: dict[str, Any]
    agent_calls: int
    refused_calls: int
    provider_calls: int
    by_phase: dict[str, int]
    by_provider: dict[str, dict[str, Any]]
    estimated_tokens: dict[str, int]
    estimated_cost_usd: float | None
    unpriced_calls: int
    basis: dict[str, int]
    cap: dict[str, Any]
    budget: dict[str, Any]
    dry_run: dict[str, Any]
    problems: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "agentCalls": self.agent_calls,
            "refusedCalls": self.refused_calls,
            "providerCalls": self.provider_calls,
            "byPhase": self.by_phase,
            "byProvider": self.by_provider,
            "estimatedTokens": self.estimated_tokens,
            "estimatedCostUsd": self.estimated_cost_usd,
            "unpricedCalls": self.unpriced_calls,
            "estimateBasis": self.basis,
            "cap": self.cap,
            "budget": self.budget,
            "dryRun": self.dry_run,
            "problems": self.problems,
        }

    def headline(self) -> str:
        """One line: calls, tokens, cost."""
        tokens = self.estimated_tokens
        cost = (
            f"≈ ${self.estimated_cost_usd:,.2f}"
            if self.estimated_cost_usd is not None
            else "cost unknown (no price for " + f"{self.unpriced_calls} call(s); set [estimates])"
        )
        return (
            f"{self.agent_calls} agent call(s), ≈ {tokens['input']:,} input + {tokens['output']:,} output "
            f"tokens, {cost}"
        )

    def lines(self) -> list[str]:
        """The text rendering: the headline, then phases, providers, limits and problems."""
        out = [f"{self.workflow['name']}: {self.headline()}"]
        if self.refused_calls:
            out.append(
                f"  {self.refused_calls} more call(s) refused before any provider (they count toward the cap)"
            )
        for phase, n in self.by_phase.items():
            out.append(f"  phase {phase}: {n}")
        for name, p in self.by_provider.items():
            models = ", ".join(f"{m} × {n}" for m, n in p["models"].items())
            cost = "" if p["estimatedCostUsd"] is None else f", ≈ ${p['estimatedCostUsd']:,.2f}"
            out.append(f"  provider {name}: {p['calls']} ({models}){cost}")
        basis = self.basis
        out.append(
            f"  estimate from: {basis['history']} call(s) by past runs ({basis['historyRuns']} run(s)), "
            f"{basis['defaults']} by per-model defaults, {basis['script']} by the fake script"
        )
        cap = self.cap
        out.append(
            f"  cap: {cap['admitted']} of {cap['limit']} calls"
            + (" — would hit the cap" if cap["wouldHit"] else "")
        )
        if self.budget["total"] is not None:
            b = self.budget
            out.append(
                f"  budget: ≈ {b['estimatedSpent']:,} of {b['total']:,} output tokens"
                + (" — would exhaust the budget" if b["wouldHit"] else "")
            )
        if self.dry_run["status"] != "completed":
            out.append(f"  the dry run ended {self.dry_run['status']}: {self.dry_run.get('error', '')}")
        out.extend(f"  problem: {p}" for p in self.problems)
        return out


def build_report(
    *,
    workflow: Mapping[str, Any],
    events: Iterable[Event],
    planned: list[PlannedCall],
    counts: CallCounts,
    token_budget: int | None,
    estimates: Estimates,
    history: History,
    status: str,
    error: str | None,
) -> PlanReport:
    """The preview of a dry run that emitted ``events`` and made the provider calls ``planned``."""
    # Each call once: its agent.queued, or the agent.cached of a call replayed in the realm.
    seen_ids: set[str] = set()
    queued = []
    for e in events:
        if (
            e.type in ("agent.queued", "agent.cached")
            and e.agent_id is not None
            and e.agent_id not in seen_ids
        ):
            seen_ids.add(e.agent_id)
            queued.append(e)
    by_phase: dict[str, int] = {}
    for e in queued:
        phase = e.payload.get("phase")
        key = phase if isinstance(phase, str) else NO_PHASE
        by_phase[key] = by_phase.get(key, 0) + 1
    by_provider: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    total_in = total_out = unpriced = 0
    cost = 0.0
    basis = {"history": 0, "historyRuns": history.runs, "defaults": 0, "script": 0}
    problems: list[str] = []
    for call in planned:
        p = by_provider.setdefault(
            call.route.provider,
            {"calls": 0, "models": {}, "estimatedTokens": {"input": 0, "output": 0}, "estimatedCostUsd": 0.0},
        )
        if call.agent_id not in seen:  # a schema re-ask is the same call
            seen.add(call.agent_id)
            p["calls"] += 1
            model = call.route.model or "(default)"
            p["models"][model] = p["models"].get(model, 0) + 1
            basis["script" if not call.estimated else call.basis] += 1
        if call.route.problem and call.route.problem not in problems:
            problems.append(call.route.problem)
        u = call.usage
        p["estimatedTokens"]["input"] += u.input
        p["estimatedTokens"]["output"] += u.output
        total_in += u.input
        total_out += u.output
        price = estimates.for_model(call.route.model, call.workflow_model).cost_usd(u.input, u.output)
        if price is None:
            unpriced += 1
            p["estimatedCostUsd"] = None
        else:
            cost += price
            if p["estimatedCostUsd"] is not None:
                p["estimatedCostUsd"] = round(p["estimatedCostUsd"] + price, 6)
    refused = max(0, counts.admitted - len(queued))
    spent = counts.spent
    would_exhaust = (
        token_budget is not None and token_budget > 0 and (counts.over_budget > 0 or spent >= token_budget)
    )
    dry: dict[str, Any] = {"status": status}
    if error:
        dry["error"] = error
    return PlanReport(
        workflow=dict(workflow),
        agent_calls=len(queued),
        refused_calls=refused,
        provider_calls=len(planned),
        by_phase=by_phase,
        by_provider=by_provider,
        estimated_tokens={"input": total_in, "output": total_out},
        estimated_cost_usd=None if unpriced else round(cost, 6),
        unpriced_calls=unpriced,
        basis=basis,
        cap={
            "limit": counts.cap,
            "admitted": counts.admitted,
            "wouldHit": counts.at_cap > 0 or counts.admitted >= counts.cap,
        },
        budget={
            "total": token_budget,
            "estimatedSpent": spent,
            "wouldHit": would_exhaust,
            "refusedCalls": counts.over_budget,
        },
        dry_run=dry,
        problems=problems,
    )
