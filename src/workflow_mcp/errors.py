"""The exception tree of workflow-mcp.

    WorkflowMcpError                 root: every error this package raises on purpose
    ├── WorkflowLoadError            a workflow file or source broke a loading rule (rule, path, line, column)
    ├── WorkflowNotFoundError        a workflow name or path did not resolve
    │   └── RunNotFoundError         a run id names no stored run
    ├── InvalidInputError            a caller gave bad input (args JSON, a fake script, an option)
    │   ├── PathRefusedError         a path lies outside the server's project roots or in its state directory
    │   ├── CallNotServableError     an agent() call the source certainly makes cannot run on the configured
    │   │                            provider (unmapped Claude alias, schema without structured output)
    │   ├── LimitWideningError       a resume asked for a wider limit than the run it continues had
    │   ├── IdempotencyKeyReusedError  an idempotency key came back with other parameters than its run's
    │   ├── RunCancelledError        a resume of a run its user cancelled after it had ended paused/interrupted
    │   ├── RunContinuedError        a cancel of an ended run that another run already resumes
    │   └── RunAlreadyResumedError   an unattended resume of an ended run that another run already resumes
    ├── SourceNotApprovedError       a workflow source (a nested child too) was never approved to run
    ├── RealmError                   the Node worker could not start, crashed or broke the protocol
    │   └── SandboxUnavailableError  the worker's OS sandbox (bubblewrap) is missing or cannot be built
    ├── RunFailedError               a run ended failed (carries the run id and the message)
    ├── RunNotConfirmedError         a run's cost preview was over the confirmation limit and not confirmed
    ├── AgentCallRefusedError        an agent() call was refused before any provider was contacted
    │                                (unknown agent type, zero tools, a non-string model, an unusable
    │                                schema): the workflow's agent() rejects with ``js_name``
    ├── LibraryError                 a workflow-library use case refused or failed (typed ``reason``)
    ├── FileWriteError               a file kept beside the state database (approvals) could not be written
    └── StoreError                   the state database refused an operation (unreadable, newer release)
        ├── RunClaimedError          another live process already executes or resumes that run
        ├── ClaimLostError           a run this process executes was taken over (its lease had expired)
        ├── SequenceConflictError    an event's sequence is not after the run's last stored one
        ├── EventBatchError          a batch of events breaks its own order (a gap, a duplicate, a step back)
        ├── StoreReadOnlyError       the database cannot be written (immutable file, read-only mount)
        ├── StoreFullError           the disk is full or the file-size limit was reached
        └── StoreCorruptError        SQLite found damaged pages; nothing more is written

Constructors take facts and build the message, so the text always names what to fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

__all__ = [
    "LIBRARY_REASONS",
    "AgentCallRefusedError",
    "CallNotServableError",
    "ClaimLostError",
    "EventBatchError",
    "FileWriteError",
    "IdempotencyKeyReusedError",
    "InvalidInputError",
    "LibraryError",
    "LibraryReason",
    "LimitWideningError",
    "PathRefusedError",
    "RealmError",
    "RunAlreadyResumedError",
    "RunCancelledError",
    "RunClaimedError",
    "RunContinuedError",
    "RunFailedError",
    "RunNotConfirmedError",
    "RunNotFoundError",
    "SandboxUnavailableError",
    "SequenceConflictError",
    "SourceNotApprovedError",
    "StoreCorruptError",
    "StoreError",
    "StoreFullError",
    "StoreReadOnlyError",
    "WorkflowLoadError",
    "WorkflowMcpError",
    "WorkflowNotFoundError",
]


class WorkflowMcpError(Exception):
    """Root of every error workflow-mcp raises on purpose."""


class WorkflowLoadError(WorkflowMcpError):
    """Raised when a workflow source breaks a loading rule.

    ``rule`` is a short stable identifier (e.g. ``meta-first-statement``), ``path`` the file (or
    ``<inline>``), ``line``/``column`` are 1-based where known. A ``syntax`` error also keeps V8's own
    words (``engine_message``) and the text of the line at ``line`` (``excerpt``).
    """

    def __init__(
        self,
        rule: str,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        engine_message: str | None = None,
        excerpt: str | None = None,
    ) -> None:
        self.rule = rule
        self.detail = message
        self.path = path
        self.line = line
        self.column = column
        self.engine_message = engine_message
        self.excerpt = excerpt
        where = path or "<inline>"
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message} [{rule}]")

    def to_json(self) -> dict[str, object]:
        """``{"rule", "message", "path", "line", "column"}`` for ``--json`` output and MCP results."""
        return {
            "rule": self.rule,
            "message": self.detail,
            "path": self.path,
            "line": self.line,
            "column": self.column,
        }


class WorkflowNotFoundError(WorkflowMcpError):
    """Raised when a workflow name or path does not resolve to a readable file.

    Discovery's own (a name nothing visible declares) also carries ``name``, ``available`` (the names
    that do resolve, in JavaScript ``localeCompare`` order) and ``invalid`` (the load error of a file
    that declares the name but breaks a rule, else ``None``); elsewhere they are empty.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        available: tuple[str, ...] = (),
        invalid: WorkflowLoadError | None = None,
    ) -> None:
        super().__init__(message)
        self.name = name
        self.available = available
        self.invalid = invalid


class RunNotFoundError(WorkflowNotFoundError):
    """Raised when ``run_id`` names no stored run (status, events, cancel, resume, …).

    ``also_not_a_file``: the caller would have read ``run_id`` as a path too (``workflow-mcp resume``
    takes a Claude Code run record or transcript directory as well), and no such file exists.
    """

    def __init__(self, run_id: str, *, also_not_a_file: bool = False) -> None:
        self.run_id = run_id
        what = f"no stored run {run_id!r}" + (" and no such file" if also_not_a_file else "")
        super().__init__(f"{what}; `workflow-mcp runs list` (MCP: the resource list) shows the stored runs")


class InvalidInputError(WorkflowMcpError):
    """Raised when a caller's input is malformed (args JSON, a fake script, an option value)."""


class CallNotServableError(InvalidInputError):
    """Raised before a run starts when an agent() call its source certainly makes cannot be served by
    the provider configuration (an unmapped Claude model alias, a schema call routed to a provider
    without structured output). ``where`` is ``file:line:column``; ``reason`` is the routing error's
    text, which names the configuration file and the key to add (or says there is none)."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(
            f"{where}: this agent() call cannot run with this configuration: {reason}; nothing was started"
        )


class PathRefusedError(InvalidInputError):
    """Raised when a path, ``cwd`` or the file a workflow name resolves to may not be reached.

    ``rule`` is ``outside-roots`` (over HTTP, files resolve only inside the server's project roots:
    its ``--trust`` directories and its working directory, symbolic links followed) or ``state-dir``
    (``$WORKFLOW_MCP_HOME`` holds tokens, approvals and every run; no tool reaches it) or
    ``malformed-path`` (it holds a NUL character, which no file name can). ``path`` is what the caller
    gave, never the resolved target of a link.
    """

    def __init__(
        self, rule: str, path: str, *, roots: tuple[str, ...] = (), state_dir: str | None = None
    ) -> None:
        self.rule = rule
        self.path = path
        self.roots = roots
        self.state_dir = state_dir
        if rule == "malformed-path":
            message = (
                f"{path!r} is not a path: it holds a NUL character, which no file name can [malformed-path]"
            )
        elif rule == "state-dir":
            message = (
                f"{path!r} is inside the server's state directory ({state_dir}), which holds its tokens, "
                "approvals and runs; no tool may reach it [state-dir]"
            )
        else:
            listed = ", ".join(roots) or "none"
            message = (
                f"{path!r} resolves (symbolic links followed) outside this server's project roots ({listed}); "
                "over HTTP, paths, cwd and workflow names resolve only inside them. Use a path inside a "
                "root, or restart the server with --trust DIR to add one [outside-roots]"
            )
        super().__init__(message)


class LimitWideningError(InvalidInputError):
    """Raised when a resume asks for a limit wider than the run it continues had: a resume may only
    narrow ``limit`` (``tokenBudget``, ``concurrency``, ``maxAgents``, ``agentTimeoutMs``,
    ``syncTimeoutMs``, ``heapMb``). ``stored`` is the run's value (``None``: unbounded),
    ``asked`` the override. A wider limit needs a new run that reuses the journal."""

    def __init__(self, run_id: str, limit: str, *, stored: int | None, asked: int | None) -> None:
        self.run_id = run_id
        self.limit = limit
        self.stored = stored
        self.asked = asked
        bound = "no bound" if stored is None else f"{stored:,}"
        wanted = "no bound" if asked is None else f"{asked:,}"
        keep = "leave it out" if stored is None else f"leave it out or give at most {stored:,}"
        super().__init__(
            f"run {run_id} ran with {limit} {bound}; a resume continues a run under its own limits and may only "
            f"narrow them, not widen this one to {wanted}: {keep}. For a wider limit, start a new run that "
            f"reuses its journal: `workflow-mcp run FILE --resume-from {run_id}` with the limit (MCP: "
            "workflow_run with name, path or script, the limit and resumeFromRunId)"
        )


class IdempotencyKeyReusedError(InvalidInputError):
    """Raised when an idempotency key that started run ``run_id`` is given again with different
    parameters (another workflow or script, other args, provider, fake script, limits, directory or
    resume): returning that run would answer a different request."""

    def __init__(self, key: str, run_id: str) -> None:
        self.key = key
        self.run_id = run_id
        super().__init__(
            f"idempotency key {key!r} was used for run {run_id} with different parameters (workflow or "
            "script, args, provider, fake script, limits, cwd or resume); nothing was started. Repeat that "
            f"call's parameters exactly to get run {run_id} again, or use a new key for a different run"
        )


class RunCancelledError(InvalidInputError):
    """Raised when run ``run_id`` is resumed after its user cancelled it while it waited
    ``ended_as`` (``paused`` or ``interrupted``): such a cancel is final (``workflow_mcp._ended_runs``)."""

    def __init__(self, run_id: str, ended_as: str, reason: str) -> None:
        self.run_id = run_id
        self.ended_as = ended_as
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"run {run_id} was cancelled while {ended_as}{why}, so it is not resumed; to reuse its finished "
            f"agent calls, start the workflow anew with `workflow-mcp run FILE --resume-from {run_id}`"
        )


class RunContinuedError(InvalidInputError):
    """Raised when ended run ``run_id`` is cancelled after run ``continued_as`` resumed it: the run to
    cancel is the one that continues it."""

    def __init__(self, run_id: str, continued_as: str) -> None:
        self.run_id = run_id
        self.continued_as = continued_as
        super().__init__(
            f"run {run_id} was not cancelled: it was resumed as run {continued_as}, which carries on its "
            f"work; cancel that run instead (`workflow-mcp runs cancel {continued_as}`)"
        )


class RunAlreadyResumedError(InvalidInputError):
    """Raised when an unattended resume (``serve --auto-resume``) of ended run ``run_id`` finds that run
    ``continued_as`` already resumes it (another server sharing the store was first)."""

    def __init__(self, run_id: str, continued_as: str) -> None:
        self.run_id = run_id
        self.continued_as = continued_as
        super().__init__(
            f"run {run_id} is already resumed as run {continued_as}; follow that run "
            f"(`workflow-mcp runs show {continued_as}`)"
        )


class SourceNotApprovedError(WorkflowMcpError):
    """Raised when a workflow source is about to run without approval: it lies under no ``--trust``
    directory and its SHA-256 was never approved. Nested ``workflow()`` children pass the same check as
    the workflow that calls them, against the directory they were resolved from."""

    def __init__(self, name: str, path: str | None, source_hash: str, *, nested: bool = False) -> None:
        self.name = name
        self.path = path
        self.source_hash = source_hash
        what = "nested workflow" if nested else "workflow"
        where = f" ({path})" if path else ""
        super().__init__(
            f"{what} {name!r}{where} (sha256 {source_hash[:16]}…) is not approved to run: it lies under no "
            "--trust directory and this exact source was never approved. Run it once with workflow_run so "
            "the user is asked to approve it, or restart the server with --trust DIR for the directory "
            "that holds it"
        )


class RealmError(WorkflowMcpError):
    """Raised when the Node worker cannot start, dies unexpectedly or breaks the message protocol."""


class SandboxUnavailableError(RealmError):
    """Raised when a run asks for an OS sandbox around its worker (``--sandbox bwrap``) that this host
    cannot give: bubblewrap is not installed, or it cannot create namespaces here."""


class RunFailedError(WorkflowMcpError):
    """Raised by ``RunHandle.result()`` when a run ends ``failed`` or ``cancelled``."""

    def __init__(self, run_id: str, status: str, message: str) -> None:
        self.run_id = run_id
        self.status = status
        self.message = message
        super().__init__(message)


class RunNotConfirmedError(WorkflowMcpError):
    """Raised when a run's cost preview exceeds the confirmation limit (``run --confirm-above N``, the
    server's ``--confirm-above``) and nobody confirmed it; nothing was started. ``calls`` is the
    preview's agent-call count, ``limit`` the limit, ``why`` how the confirmation was refused."""

    def __init__(self, workflow: str, calls: int, limit: int, why: str) -> None:
        self.workflow = workflow
        self.calls = calls
        self.limit = limit
        self.why = why
        super().__init__(
            f"workflow {workflow!r} would make {calls} agent calls, more than the {limit} that may start "
            f"without confirmation, and {why}; nothing was started"
        )


class AgentCallRefusedError(WorkflowMcpError):
    """Raised (and turned into the rejection of the workflow's agent() call) when a call is refused
    before any provider is contacted. ``js_name`` is the error name workflow code sees, as Claude Code
    2.1.332 names it: ``Error``, ``TypeError`` or ``TelemetrySafeError``. Such a call still counts
    toward the run's 1,000-call cap (measured, case ``agents-refused-calls-count-toward-cap``)."""

    js_name: str = "Error"

    def __init__(self, message: str, *, js_name: str | None = None) -> None:
        if js_name is not None:
            self.js_name = js_name
        super().__init__(message)


class StoreError(WorkflowMcpError):
    """Raised when the state database is unreadable, damaged or from a newer release."""


class RunClaimedError(StoreError):
    """Raised when a run is started or resumed while a live process holds its claim (one executor per run).

    ``holder_run`` is the run executing under the claim: ``run_id`` itself (the run is still running)
    or the run that resumes it; ``pid``/``host`` name the owning process, ``since`` when it claimed it.
    """

    def __init__(self, run_id: str, *, holder_run: str, pid: int, host: str, since: str) -> None:
        self.run_id = run_id
        self.holder_run = holder_run
        self.pid = pid
        self.host = host
        self.since = since
        if holder_run == run_id:
            message = (
                f"run {run_id} is still running in process {pid} on {host} (since {since}); wait for it, "
                f"or cancel it with `workflow-mcp runs cancel {run_id}`, then resume"
            )
        else:
            message = (
                f"run {run_id} is already being resumed by process {pid} on {host} (since {since}) as run "
                f"{holder_run}; follow that run, or cancel it with `workflow-mcp runs cancel {holder_run}`"
            )
        super().__init__(message)


class ClaimLostError(StoreError):
    """Raised when a process writes to a run it executes after losing the run's claim: its lease
    expired (the process was paused, or cut off from the database, for longer than its lease) and
    another server judged it gone and recovered or resumed the run. Nothing is written; the run goes
    on, if at all, in the server that took it over."""

    def __init__(self, run_id: str, holder: str | None) -> None:
        self.run_id = run_id
        self.holder = holder
        now = f"run {holder} holds its claim now" if holder is not None else "its claim was dropped"
        super().__init__(
            f"run {run_id} was taken over by another server ({now}) after this process's lease expired; "
            "this process writes nothing more to it"
        )


class SequenceConflictError(StoreError):
    """Raised when an event's sequence is not after the newest stored one of its run (a second writer)."""

    def __init__(self, run_id: str, sequence: int, last: int) -> None:
        self.run_id = run_id
        self.sequence = sequence
        self.last = last
        super().__init__(
            f"run {run_id}: event sequence {sequence} is not after {last}; another writer has written to "
            "this run, so this one stops instead of interleaving its events"
        )


class EventBatchError(StoreError):
    """Raised when a batch of events given to the store breaks its own order: within the batch, each
    event of a run must have the sequence one more than the run's event before it. ``problem`` is
    ``"gap"``, ``"duplicate"`` or ``"out of order"``; ``index`` is the event's place in the batch
    (from 0). Nothing of the batch is stored."""

    def __init__(self, run_id: str, index: int, sequence: int, previous: int) -> None:
        self.run_id = run_id
        self.index = index
        self.sequence = sequence
        self.previous = previous
        self.problem = (
            "gap" if sequence > previous + 1 else "duplicate" if sequence == previous else "out of order"
        )
        what = {
            "gap": f"skips {previous + 1}" + (f" to {sequence - 1}" if sequence > previous + 2 else ""),
            "duplicate": "repeats it",
            "out of order": "goes back",
        }[self.problem]
        super().__init__(
            f"run {run_id}: events refused by the store: event {index} of the batch has sequence {sequence} "
            f"after {previous}, which {what} ({self.problem}); a batch's events of one run must follow one "
            "another (each sequence one more than the one before it), so nothing of the batch was stored"
        )


class StoreReadOnlyError(StoreError):
    """Raised when something must be recorded but the state database cannot be written (``reason``);
    ``fix`` says what to do (default: for the SQLite file)."""

    def __init__(self, path: str, reason: str, fix: str | None = None) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"the state database {path} is read-only ({reason}): runs can be listed, shown and exported, "
            "but nothing new can be recorded. "
            + (fix or "Make it writable, or point WORKFLOW_MCP_HOME at a writable directory")
        )


class StoreFullError(StoreError):
    """Raised when a write to the state database fails for lack of space.

    ``file_size_limit`` (bytes) is set when the process's file-size limit (``ulimit -f``,
    ``RLIMIT_FSIZE``) was reached; otherwise ``free_bytes`` is what the file system has left at
    ``directory``. The failed transaction is rolled back: every stored run stays readable. ``then``
    says what to do once space is back (default: resume the run).
    """

    def __init__(
        self,
        path: str,
        *,
        directory: str,
        free_bytes: int | None,
        file_size_limit: int | None = None,
        then: str = "resume the run (`workflow-mcp resume RUN_ID`)",
    ) -> None:
        self.path = path
        self.directory = directory
        self.free_bytes = free_bytes
        self.file_size_limit = file_size_limit
        if file_size_limit is not None:
            what = f"the file-size limit was reached ({file_size_limit:,} bytes, `ulimit -f`) writing {path}"
            fix = "raise the limit"
        else:
            free = "unknown" if free_bytes is None else f"{free_bytes:,}"
            what = f"the disk is full ({free} bytes free at {directory}) writing {path}"
            fix = "free some space"
        super().__init__(
            f"{what}; nothing was half-written and every stored run stays readable. To continue, {fix}, "
            f"then {then}"
        )


class StoreCorruptError(StoreError):
    """Raised when SQLite reports damaged pages (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) or a failed check.

    From then on the store writes nothing more to the file; ``detail`` is SQLite's own finding.
    ``opened=False``: not even the header could be read, so nothing can be saved from the file.
    """

    def __init__(self, path: str, detail: str, *, opened: bool = True) -> None:
        self.path = path
        self.detail = detail
        if not opened:
            super().__init__(
                f"the state database {path} cannot be opened ({detail}); it is left untouched. Move it aside "
                "or point WORKFLOW_MCP_HOME elsewhere."
            )
            return
        super().__init__(
            f"the state database {path} is damaged ({detail}); workflow-mcp writes nothing more to it. "
            "Save what can still be read with `workflow-mcp runs export --out runs.jsonl`, then run "
            "`workflow-mcp store repair` (it copies the damaged file to a backup first)"
        )


# -- the workflow library ------------------------------------------------------------------------
LibraryReason = Literal[
    "not_found",
    "version_not_found",
    "already_exists",
    "invalid_source",
    "invalid_version",
    "invalid_input",
    "cancelled",
    "confirmation_invalid",
    "target_changed",
    "write_failed",
]
#: Every :data:`LibraryReason`, in the order above.
LIBRARY_REASONS: tuple[str, ...] = get_args(LibraryReason)


class LibraryError(WorkflowMcpError):
    """Raised when a workflow-library use case (create, draft, describe, delete) refuses or fails.

    ``reason`` is the stable code callers branch on (:data:`LibraryReason`); ``errors`` holds the
    loader's errors (``WorkflowLoadError.to_json()``) for ``invalid_source``. A ``write_failed`` message
    names the operating system's error code and description, never an absolute path.
    """

    def __init__(
        self, reason: LibraryReason, message: str, *, errors: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        self.reason: LibraryReason = reason
        self.detail = message
        self.errors = [dict(e) for e in errors]
        super().__init__(f"{message} [{reason}]")

    def to_json(self) -> dict[str, Any]:
        """``{"reason", "message", "errors"}``."""
        return {"reason": self.reason, "message": self.detail, "errors": self.errors}


class FileWriteError(WorkflowMcpError):
    """Raised when a file this package keeps beside the state database (the source approvals file)
    cannot be written: the disk or the quota is full (``ENOSPC``, ``EDQUOT``), the file system is
    read-only (``EROFS``), permission is denied, or a directory on the way is a symbolic link
    (``ELOOP``). The file is only ever replaced whole, so it keeps what it held before.

    ``path`` is the file, ``code`` the system's error name (``"ENOSPC"``), ``free_bytes`` what the file
    system has left at ``directory`` (``None`` when it cannot be told).
    """

    def __init__(
        self, what: str, path: str, *, code: str, detail: str, directory: str, free_bytes: int | None
    ) -> None:
        self.path = path
        self.code = code
        self.directory = directory
        self.free_bytes = free_bytes
        if code in ("ENOSPC", "EDQUOT"):
            free = "unknown" if free_bytes is None else f"{free_bytes:,}"
            why = f"the {'disk' if code == 'ENOSPC' else 'disk quota'} is full ({free} bytes free at {directory})"
            fix = "free some space"
        else:
            why = detail
            fix = "fix that"
        super().__init__(
            f"{what} {path} could not be written: {why} [{code}]; it keeps what it held before. "
            f"To continue, {fix} and try again"
        )
