"""What a caller asks of a run — its limits, its provider choice, what a resume changes — and a run
prepared to start. Values of :class:`~workflow_mcp.service.WorkflowService`'s run use cases, re-exported
by :mod:`workflow_mcp.service`.

A run records its limits and its provider choice (``RunRecord.options``), so a resume continues under
the same ones: :meth:`RunLimits.of_options` and :meth:`ProviderChoice.of_record` read them back,
:meth:`RunLimits.narrowed` applies a resume's overrides (narrower only), :meth:`RunLimits.within` a
server's ceilings.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from .definitions.load import Workflow
from .definitions.profile import Profile, default_concurrency
from .engine.journal import Replay, ResumePolicy
from .engine.run import MISSING, RunOptions
from .errors import InvalidInputError, LimitWideningError
from .providers.base import AgentProvider
from .realm.worker import DEFAULT_HEAP_MB, RealmWorker
from .store.base import RunRecord

__all__ = ["PreparedRun", "ProviderChoice", "RunLimits", "RunOverrides"]

#: How each limit is named to callers: the MCP argument, then the CLI option.
LIMIT_NAMES: Final = {
    "concurrency": "concurrency (--concurrency)",
    "token_budget": "tokenBudget (--token-budget)",
    "max_agents": "maxAgents (--max-agents)",
    "agent_timeout_ms": "agentTimeoutMs (--agent-timeout-ms)",
    "sync_timeout_ms": "syncTimeoutMs (--sync-timeout-ms)",
    "heap_mb": "heapMb (--heap-mb)",
}


@dataclass(frozen=True)
class RunLimits:
    """The limits of one run; ``None`` leaves a limit at its default.

    ``concurrency``: agents running at once (default ``min(16, max(2, cpus - 2))``); ``token_budget``:
    ``budget.total`` in output tokens (default none: ``budget.total`` is ``null``); ``max_agents``:
    lowers the profile's 1,000-call cap; ``agent_timeout_ms``: bounds each provider call (default
    none); ``sync_timeout_ms``: the longest synchronous stretch of workflow code (default the profile's
    30,000 ms); ``heap_mb``: the realm's heap (default 1,024 MB).
    """

    concurrency: int | None = None
    token_budget: int | None = None
    max_agents: int | None = None
    agent_timeout_ms: int | None = None
    sync_timeout_ms: int | None = None
    heap_mb: int | None = None

    @classmethod
    def of_options(cls, options: Mapping[str, Any]) -> RunLimits:
        """The limits a run recorded (``RunRecord.options``, written by ``start_run``)."""
        return cls(**{f.name: _int(options.get(f.name)) for f in fields(cls)})

    def within(self, ceiling: RunLimits | None) -> RunLimits:
        """Each limit at most ``ceiling``'s (a server's policy: applied silently, never refused)."""
        if ceiling is None:
            return self
        values = {}
        for f in fields(self):
            mine, top = getattr(self, f.name), getattr(ceiling, f.name)
            values[f.name] = top if mine is None else mine if top is None else min(mine, top)
        return RunLimits(**values)

    def narrowed(self, overrides: RunLimits, *, run_id: str, profile: Profile) -> RunLimits:
        """These stored limits of run ``run_id`` with ``overrides`` applied; an override may only narrow.

        A limit left at its default is compared with that default under ``profile`` (a run that ran
        with the default concurrency of 16 resumes with at most 16).

        Raises:
            LimitWideningError: an override is wider than the run's own limit (the message says how to
                get a wider one: a new run that reuses the journal).
        """
        values = {}
        for f in fields(self):
            asked = getattr(overrides, f.name)
            stored = getattr(self, f.name)
            if asked is None:
                values[f.name] = stored
                continue
            bound = stored if stored is not None else _default(f.name, profile)
            if bound is not None and asked > bound:
                raise LimitWideningError(run_id, LIMIT_NAMES[f.name], stored=bound, asked=asked)
            values[f.name] = asked
        return RunLimits(**values)

    def options(self, *, profile: str | None, cwd: str | None, home: str | None) -> RunOptions:
        """The engine's :class:`~workflow_mcp.engine.run.RunOptions` for these limits."""
        return RunOptions(
            concurrency=self.concurrency,
            token_budget=self.token_budget,
            sync_timeout_ms=self.sync_timeout_ms,
            max_agents=self.max_agents,
            agent_timeout_ms=self.agent_timeout_ms,
            heap_mb=self.heap_mb or DEFAULT_HEAP_MB,
            profile=profile,
            cwd=cwd,
            home=home,
        )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _default(name: str, profile: Profile) -> int | None:
    """What the engine applies for a limit left at ``None`` (``None``: unbounded)."""
    return {
        "concurrency": default_concurrency(profile),
        "max_agents": profile.max_agent_calls,
        "sync_timeout_ms": profile.sync_timeout_ms,
        "heap_mb": DEFAULT_HEAP_MB,
    }.get(name)


@dataclass(frozen=True)
class ProviderChoice:
    """Which provider a run uses, recorded with the run so a resume makes the same choice.

    ``name``: a registered provider (``fake``, ``codex``, ``claude``, ``acp``, ``openai`` …) that takes
    every call, or ``None``: the configuration (``workflow-mcp.toml``, else
    ``$WORKFLOW_MCP_HOME/config.toml``, read in the run's directory) routes each call, and with no
    configuration the first ready of codex/claude/acp is used. ``fake_script``: the fake provider's
    script (JSON, the format of :class:`~workflow_mcp.providers.fake.FakeProvider`), with ``fake`` only.

    Raises:
        InvalidInputError: a ``fake_script`` with another provider.
    """

    name: str | None = None
    fake_script: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.fake_script is not None and self.name != "fake":
            raise InvalidInputError(
                f"a fake script applies only to provider 'fake', not {self.name or 'the configured routing'!r}"
            )

    @classmethod
    def of_provider(cls, provider: AgentProvider) -> ProviderChoice:
        """The choice a caller-built ``provider`` stands for (a resume rebuilds it by name; a fake
        keeps its script, so the resumed calls are answered as the first run's were)."""
        name = getattr(provider, "name", "") or None
        script = getattr(provider, "script", None) if name == "fake" else None
        return cls(
            None if name == "routing" else name, copy.deepcopy(script) if isinstance(script, dict) else None
        )

    @classmethod
    def of_record(cls, record: RunRecord) -> ProviderChoice:
        """The choice run ``record`` was started with. Runs recorded before choices were stored name
        only their provider (``routing``: the configuration chose) and, for the fake, its script."""
        stored = record.options.get("providerConfig")
        stored = stored if isinstance(stored, Mapping) else {}
        name = stored.get("name", record.provider or None)
        if name == "routing" or not isinstance(name, str | None):
            name = None
        script = stored.get("fakeScript") if name == "fake" else None
        return cls(name, script if isinstance(script, Mapping) else None)

    def to_json(self) -> dict[str, Any]:
        """``{"name", "fakeScript"?}``, as recorded in ``RunRecord.options["providerConfig"]``."""
        return {"name": self.name} | (
            {"fakeScript": dict(self.fake_script)} if self.fake_script is not None else {}
        )

    def instead_of(self, stored: ProviderChoice) -> ProviderChoice:
        """This choice as a resume's override of ``stored``: naming the stored provider again without a
        fake script keeps the stored script (say ``fake_script={}`` for an unscripted fake)."""
        if self.name == stored.name and self.fake_script is None:
            return stored
        return self


@dataclass(frozen=True)
class RunOverrides:
    """What a resume changes of the run it continues (everything else is the run's own: its stored
    source, args, limits, profile, directory, provider choice and fake script).

    ``limits`` may only narrow the run's (:meth:`RunLimits.narrowed`); ``provider`` replaces its choice
    (a :class:`ProviderChoice`, or a provider instance the caller owns and closes); ``args`` replaces
    its args (``MISSING``: the stored ones); ``cwd`` its directory; ``policy`` is the resume policy
    (``content``: order-independent, the default; ``prefix``: Claude's longest unchanged prefix).
    ``checkpoint_replies`` answers human checkpoints by id (``{"cp_…": "allow" | "deny"}``, e.g. the
    paused run's ``checkpointContext.checkpointId``); decisions the run already journaled replay too.
    """

    limits: RunLimits = RunLimits()
    provider: ProviderChoice | AgentProvider | None = None
    args: Any = MISSING
    cwd: str | None = None
    policy: ResumePolicy = "content"
    checkpoint_replies: Mapping[str, str] = field(default_factory=dict[str, str])


@dataclass
class PreparedRun:
    """A run that passed every check and waits to be launched (``WorkflowService.launch``): its loaded
    ``workflow`` (V8 has checked it, in ``worker`` when one is given), the provider, args, engine
    options and, for a resume, the run it continues with its ``replay``. Nothing is recorded yet.
    Launch it, or :meth:`discard` it to stop its worker."""

    workflow: Workflow
    provider: AgentProvider
    choice: ProviderChoice
    args: Any
    options: RunOptions
    resume_from: str | None = None
    policy: ResumePolicy = "content"
    replay: Replay | None = None
    worker: RealmWorker | None = None
    #: A continuation of ``resume_from`` (``WorkflowService.resume``), not a new run reusing its journal.
    continues: bool = False
    #: An unattended continuation: refused when another run already continues ``resume_from``.
    exclusive: bool = False

    async def discard(self) -> None:
        """Stop the prepared worker, if any (idempotent)."""
        worker, self.worker = self.worker, None
        if worker is not None:
            await worker.close()
