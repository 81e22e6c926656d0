"""Automatic resume of runs paused for a usage limit (``workflow-mcp serve --auto-resume``).

A provider whose usage or quota limit is spent pauses the run with reason ``usage_limit`` and, when the
backend said, ``resetsAt`` (see :class:`~workflow_mcp.providers.base.ProviderUsageLimitError`). An
:class:`AutoResumer` watches the runs its service executes and resumes each such run once its
``resetsAt`` has passed, exactly as :meth:`~workflow_mcp.service.WorkflowService.resume` does (the run's
stored source, args, limits, provider choice and fake script; every finished call replayed).

Rules (workflow-mcp's; the profile has no unattended resume):

- Only ``usage_limit`` pauses are resumed. A run paused for authentication (``auth_required``: a login
  is needed first) or a human checkpoint (``checkpoint_required``: someone must answer it) is never
  resumed automatically, nor is a run that ended any other way (completed, failed, cancelled).
- A paused run and the runs resuming it form one *chain*; a chain gets at most
  :attr:`AutoResumeSettings.attempts` resumes. The first waits until ``resetsAt`` (or
  ``backoff_s`` after the pause when the backend gave no reset time); each later one also waits
  ``backoff_s``, doubled per attempt up to ``max_backoff_s``, after the one before it.
- A paused run its user cancelled (``workflow-mcp runs cancel``, ``workflow_run_cancel``) is never
  resumed; when the cancel lands while a resume is being prepared, exactly one of them wins
  (:mod:`._ended_runs`), and a lost resume is a ``log`` event saying so.
- A paused run that someone else resumed meanwhile (a run of this service or, among the store's newest
  :data:`CONTINUED_SCAN` runs, another process's resumes it, or another process holds its claim) is
  left to them.
- Every attempt is an event in the paused run's own log: a ``log`` event naming the run that resumes
  it, or a ``warning`` when the resume could not start; a chain out of attempts gets a ``warning``
  saying so and how to resume it by hand. Each carries ``autoResume``: ``{"attempt", "attempts",
  "resumedAs"?}``.

Runs paused before the server started (or by another process sharing the store, e.g. ``workflow-mcp
run``) are taken on too when the resumer is given ``adopt``, the owners whose runs it may resume: every
:data:`STORE_SCAN_S` it looks at the store's newest :data:`CONTINUED_SCAN` runs for usage-limit pauses
of those owners (``None`` is the local user: CLI and stdio runs). A stdio server adopts the local
user's runs, an HTTP server only the runs its own tokens started (never the local user's). Such a run's
chain carries on from the notes of earlier attempts in the store (its own, and the one on the run it
resumes), so a restart does not grant a chain more attempts (the next one waits a whole backoff after
the restart); a chain that already gave up stays given up, and a run another stored run resumes is
left to it. An adopted resume is exclusive: when several servers share the store, one of them resumes the run
and the others find it resumed (:mod:`._ended_runs`) and leave it.

Time comes from an injectable ``clock`` (seconds since the epoch), so tests move it instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import (
    InvalidInputError,
    RunAlreadyResumedError,
    RunCancelledError,
    RunClaimedError,
    WorkflowMcpError,
)
from .providers.config import load_config
from .service import WorkflowService

__all__ = [
    "AutoResumeSettings",
    "AutoResumer",
    "ResumeDeferredError",
    "auto_resume_settings",
]

#: How often the runs are looked at when none of them ends meanwhile (a run's end wakes it at once).
POLL_S: Final = 5.0
#: workflow-mcp limit: how many of the store's newest runs are searched for one that already resumes a
#: paused run before it is resumed automatically.
CONTINUED_SCAN: Final = 1000
#: How often (seconds, by the resumer's clock) the store is searched for paused runs to adopt.
STORE_SCAN_S: Final = 60.0
GAVE_UP = "auto-resume gave up"


@dataclass(frozen=True)
class AutoResumeSettings:
    """How a server resumes its usage-limit-paused runs (module docstring).

    ``attempts``: resumes per chain (default 5, at least 1). ``backoff_s``: the wait, in seconds,
    after an attempt before the next (default 60), doubled per attempt up to ``max_backoff_s``
    (default 3,600); also the wait after a pause that gave no reset time.

    Raises:
        InvalidInputError: a value out of range (the message names the setting).
    """

    attempts: int = 5
    backoff_s: float = 60.0
    max_backoff_s: float = 3600.0

    def __post_init__(self) -> None:
        if not 1 <= self.attempts <= 1000:
            raise InvalidInputError(f"auto_resume.attempts must be from 1 to 1000, got {self.attempts}")
        if not 0 <= self.backoff_s <= self.max_backoff_s:
            raise InvalidInputError(
                f"auto_resume.backoff_s must be from 0 to max_backoff_s ({self.max_backoff_s}), got "
                f"{self.backoff_s}"
            )

    def backoff(self, attempt: int) -> float:
        """Seconds between attempt ``attempt`` (from 1) and the next."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** min(attempt - 1, 40)))


def auto_resume_settings(cwd: str | None = None) -> tuple[bool, AutoResumeSettings]:
    """``(enabled, settings)`` from the ``[auto_resume]`` table of the configuration that applies in
    ``cwd`` (``workflow-mcp.toml`` up from it, else ``$WORKFLOW_MCP_HOME/config.toml``; see
    :mod:`workflow_mcp.providers.config`, which checks the table)::

        [auto_resume]
        enabled = true        # serve resumes usage-limit-paused runs (serve --auto-resume says so too)
        attempts = 5
        backoff_s = 60
        max_backoff_s = 3600

    Raises:
        ProviderConfigError: the configuration is malformed (the message names the file and key).
    """
    table = load_config(cwd).auto_resume
    values = {key: table[key] for key in ("attempts", "backoff_s", "max_backoff_s") if key in table}
    defaults = AutoResumeSettings()
    if "max_backoff_s" not in values and values.get("backoff_s", 0) > defaults.max_backoff_s:
        values["max_backoff_s"] = values["backoff_s"]
    if "backoff_s" not in values and values.get("max_backoff_s", defaults.backoff_s) < defaults.backoff_s:
        values["backoff_s"] = values["max_backoff_s"]
    return bool(table.get("enabled", False)), AutoResumeSettings(**values)


class ResumeDeferredError(WorkflowMcpError):
    """Raised by a :data:`ResumeFn` when the resume cannot start *now* for a reason that passes by
    itself (a server already runs as many runs as it may): the resume is tried again after
    ``backoff_s`` (at least :data:`POLL_S`) without spending one of the chain's attempts."""


ResumeFn = Callable[[str], Awaitable[str]]
"""Resumes one stored run by id and returns the id of the run that continues it (raises
:class:`~workflow_mcp.errors.WorkflowMcpError` when it cannot start, :class:`ResumeDeferredError` when
it cannot start yet)."""


@dataclass
class _Chain:
    """A paused run and the runs resuming it: how many resumes it had, and when the last one was."""

    root: str
    attempts: int = 0
    last_attempt: float | None = None


@dataclass
class _Pending:
    chain: _Chain
    due: float
    resets_at: str | None = None
    deferred: bool = False  # a deferral was noted (once per pause)


@dataclass
class _Seen:
    pending: dict[str, _Pending] = field(default_factory=dict)
    decided: set[str] = field(default_factory=set)  # run ids looked at and settled
    started: dict[str, _Chain] = field(default_factory=dict)  # run id we started -> its chain


class AutoResumer:
    """Resumes the usage-limit-paused runs ``service`` executes (module docstring).

    ``resume`` starts the continuation of one run (default: ``service.resume`` with the run's own
    options and owner; the MCP server passes one that also applies its run cap, provider policy and
    file scope). ``clock`` is seconds since the epoch (default ``time.time``). Drive it with
    :meth:`tick` (tests) or :meth:`run` (a server's background task). ``adopt``: the owners whose
    runs already paused in the store it takes on too (module docstring; default none).
    """

    def __init__(
        self,
        service: WorkflowService,
        settings: AutoResumeSettings | None = None,
        *,
        resume: ResumeFn | None = None,
        clock: Callable[[], float] | None = None,
        adopt: Collection[str | None] | None = None,
    ) -> None:
        self.service = service
        self.settings = settings or AutoResumeSettings()
        self._resume = resume or self._default_resume
        self._clock = clock or time.time
        self._seen = _Seen()
        self._adopt = None if adopt is None else frozenset(adopt)
        self._next_scan: float | None = None

    async def _default_resume(self, run_id: str) -> str:
        prepared = await self.service.prepare_resume(run_id)
        prepared.exclusive = True
        return self.service.launch(prepared, owner=self.service.owner_of(run_id)).run_id

    def next_due(self) -> float | None:
        """When (epoch seconds) the next resume is due, or ``None`` when none is waiting."""
        return min((p.due for p in self._seen.pending.values()), default=None)

    def waiting(self) -> dict[str, float]:
        """The paused runs waiting for their resume, with when (epoch seconds) it is due."""
        return {run_id: p.due for run_id, p in self._seen.pending.items()}

    async def tick(self) -> list[str]:
        """Look at the service's runs once and start every resume that is due by the clock; returns
        the ids of the runs started. Never raises for one run's trouble (each is an event in its log)."""
        now = self._clock()
        self._notice(now)
        started: list[str] = []
        for run_id in sorted(self._seen.pending, key=lambda rid: self._seen.pending[rid].due):
            pending = self._seen.pending[run_id]
            if pending.due > now:
                continue
            del self._seen.pending[run_id]
            try:
                new_id = await self._attempt(run_id, pending, now)
            except BaseException:
                # Nothing was decided: the resume stays due for the next pass.
                self._seen.decided.discard(run_id)
                self._seen.pending[run_id] = pending
                raise
            if new_id is not None:
                started.append(new_id)
        return started

    async def run(self, sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Tick until cancelled: after each tick, wait until the next resume is due, a run of the
        service ends, or :data:`POLL_S` has passed, whichever comes first. ``sleep`` (seconds) replaces
        that wait (a test's, which moves its clock instead). A pass that fails (the store refusing a
        read, say) is reported through the service's ``notify`` and the loop goes on after
        :data:`POLL_S` (a lasting fault must not spin)."""
        while True:
            failed = False
            try:
                await self.tick()
            except Exception as exc:  # the top-level loop: one bad pass must not end automatic resume
                failed = True
                if self.service.notify is not None:
                    self.service.notify(
                        f"auto-resume: a pass failed ({type(exc).__name__}: {exc}); trying again"
                    )
            due = self.next_due()
            wait = POLL_S if due is None or failed else max(0.0, min(POLL_S, due - self._clock()))
            if sleep is not None:
                await sleep(wait)
                continue
            running = [h for h in self.service.live.values() if h.status == "running"]
            tasks = [
                asyncio.ensure_future(asyncio.sleep(wait)),
                *(asyncio.ensure_future(h.wait()) for h in running),
            ]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()

    # -- one pass ----------------------------------------------------------------------------
    def _notice(self, now: float) -> None:
        """Take in the runs that paused since the last look."""
        if self._adopt is not None and (self._next_scan is None or now >= self._next_scan):
            self._next_scan = now + STORE_SCAN_S
            self._adopt_stored(now)
        for run_id, handle in list(self.service.live.items()):
            if run_id in self._seen.decided or run_id in self._seen.pending or handle.status != "paused":
                continue
            state = self.service.status(run_id)
            chain = self._seen.started.pop(run_id, None) or _Chain(root=run_id)
            if state.status != "paused" or state.paused_reason != "usage_limit":
                self._seen.decided.add(run_id)  # auth_required and checkpoint_required wait for a person
                continue
            if chain.attempts >= self.settings.attempts:
                self._seen.decided.add(run_id)
                self._note(run_id, "warning", _gave_up(run_id, chain.attempts), chain)
                continue
            self._seen.pending[run_id] = _Pending(
                chain, self._due(state.resets_at, chain, now), state.resets_at
            )

    def _adopt_stored(self, now: float) -> None:
        """Take in the usage-limit-paused runs of the adopted owners that the store holds and this
        service does not run (paused before it started, or by another process)."""
        assert self._adopt is not None
        seen = self._seen
        records = self.service.store.list_runs(CONTINUED_SCAN)
        continued = {r.resumed_from for r in records if r.resumed_from is not None}
        for record in records:
            run_id = record.run_id
            if run_id in self.service.live or run_id in seen.decided or run_id in seen.pending:
                continue
            if record.owner not in self._adopt or run_id in continued:
                seen.decided.add(run_id)
                continue
            status = self.service.run_status(run_id)
            if status in ("queued", "running"):
                continue  # another process runs it: looked at again by the next scan
            state = self.service.status(run_id) if status == "paused" else None
            if state is None or state.paused_reason != "usage_limit":
                seen.decided.add(run_id)
                continue
            chain = self._stored_chain(run_id, record.resumed_from, now)
            if chain is None or chain.attempts >= self.settings.attempts:
                seen.decided.add(run_id)  # it gave up before (its note says so) or will say so now
                if chain is not None:
                    self._note(run_id, "warning", _gave_up(run_id, chain.attempts), chain)
                continue
            seen.pending[run_id] = _Pending(chain, self._due(state.resets_at, chain, now), state.resets_at)

    def _stored_chain(self, run_id: str, resumed_from: str | None, now: float) -> _Chain | None:
        """The chain of a stored paused run, from the attempt notes in the store (``None``: a note says
        its chain gave up). A chain with attempts behind it counts its last one as made ``now`` (the
        notes' times come from another clock), so its next waits a whole backoff after a restart."""
        chain = _Chain(root=run_id)
        notes = [
            (e, e.payload["autoResume"]) for e in self.service.events(run_id) if "autoResume" in e.payload
        ]
        if resumed_from is not None:
            with contextlib.suppress(WorkflowMcpError):
                notes += [
                    (e, e.payload["autoResume"])
                    for e in self.service.events(resumed_from)
                    if isinstance(e.payload.get("autoResume"), dict)
                    and e.payload["autoResume"].get("resumedAs") == run_id
                ]
        for event, detail in notes:
            if str(event.payload.get("message", "")).startswith(GAVE_UP):
                return None
            attempt = detail.get("attempt") if isinstance(detail, dict) else None
            if isinstance(attempt, int) and attempt > chain.attempts:
                chain.attempts, chain.last_attempt = attempt, now
        return chain

    def _due(self, resets_at: str | None, chain: _Chain, now: float) -> float:
        reset = _epoch(resets_at)
        if chain.last_attempt is not None:
            after = chain.last_attempt + self.settings.backoff(chain.attempts)
            return max(after, reset) if reset is not None else after
        return reset if reset is not None else now + self.settings.backoff_s

    async def _attempt(self, run_id: str, pending: _Pending, now: float) -> str | None:
        chain = pending.chain
        self._seen.decided.add(run_id)
        if self.service.run_status(run_id) != "paused" or self._continued(run_id):
            return None  # resumed by someone else, or no longer paused
        attempt, of = chain.attempts + 1, self.settings.attempts
        try:
            new_id = await self._resume(run_id)
        except ResumeDeferredError as exc:  # not an attempt: nothing was tried
            every = max(self.settings.backoff_s, POLL_S)  # never a busy loop, even with backoff_s = 0
            retry = now + every
            self._seen.decided.discard(run_id)
            self._seen.pending[run_id] = _Pending(chain, retry, pending.resets_at, deferred=True)
            if not pending.deferred:
                self._note(
                    run_id,
                    "log",
                    f"auto-resume deferred: {exc}; it is tried again every {every:g} s",
                    chain,
                )
            return None
        except (RunClaimedError, RunCancelledError, RunAlreadyResumedError) as exc:
            chain.attempts, chain.last_attempt = attempt, now
            self._note(run_id, "log", f"auto-resume left this run alone: {exc}", chain)
            return None
        except WorkflowMcpError as exc:
            chain.attempts, chain.last_attempt = attempt, now
            if attempt < of:
                retry = now + self.settings.backoff(attempt)
                self._seen.decided.discard(run_id)  # waits again
                self._seen.pending[run_id] = _Pending(chain, retry, pending.resets_at)
                then = f"; the next attempt is due at {_iso(retry)}"
            else:
                then = f"; no attempts are left: resume it by hand (`workflow-mcp resume {run_id}`)"
            self._note(
                run_id,
                "warning",
                f"auto-resume attempt {attempt} of {of} could not start: {exc}{then}",
                chain,
            )
            return None
        chain.attempts, chain.last_attempt = attempt, now
        self._seen.started[new_id] = chain
        reset = f" (the usage limit reset at {pending.resets_at})" if pending.resets_at else ""
        self._note(
            run_id,
            "log",
            f"auto-resume attempt {attempt} of {of}: resumed as run {new_id}{reset}",
            chain,
            resumed_as=new_id,
        )
        return new_id

    def _continued(self, run_id: str) -> bool:
        """Whether a run already resumes ``run_id``: one of this service's, or one of the newest
        :data:`CONTINUED_SCAN` runs in the store (another process's ``workflow-mcp resume``, which would
        otherwise be repeated, its calls run twice)."""
        for other in list(self.service.live):
            record = self.service.store.get_run(other)
            if record is not None and record.resumed_from == run_id:
                return True
        try:
            return any(r.resumed_from == run_id for r in self.service.store.list_runs(CONTINUED_SCAN))
        except WorkflowMcpError:
            return False  # the store's claim on the run still refuses a second live resume

    def _note(
        self, run_id: str, kind: str, message: str, chain: _Chain, *, resumed_as: str | None = None
    ) -> None:
        detail: dict[str, Any] = {"attempt": chain.attempts, "attempts": self.settings.attempts}
        if resumed_as is not None:
            detail["resumedAs"] = resumed_as
        with contextlib.suppress(WorkflowMcpError):  # a store refusing the note must not stop the others
            self.service.note_ended_run(run_id, kind, {"message": message, "autoResume": detail})


def _gave_up(run_id: str, attempts: int) -> str:
    return (
        f"{GAVE_UP}: the usage limit still held after {attempts} automatic resume(s); resume it by hand "
        f"(`workflow-mcp resume {run_id} --wait`)"
    )


def _epoch(stamp: str | None) -> float | None:
    """An ISO 8601 time (``Z`` or an offset; no zone means UTC) as epoch seconds; ``None`` if unreadable."""
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _iso(moment: float) -> str:
    return datetime.datetime.fromtimestamp(int(moment), tz=datetime.UTC).isoformat().replace("+00:00", "Z")
