"""The exception tree of workflow-mcp.

    WorkflowMcpError                 root: every error this package raises on purpose
    ├── WorkflowLoadError            a workflow file or source broke a loading rule (rule, path, line, column)
    ├── WorkflowNotFoundError        a workflow name or path did not resolve
    ├── InvalidInputError            a caller gave bad input (args JSON, a fake script, an option)
    ├── RealmError                   the Node worker could not start, crashed or broke the protocol
    ├── RunFailedError               a run ended failed (carries the run id and the message)
    └── StoreError                   the state database refused an operation (unreadable, newer release)
        ├── RunClaimedError          another live process already executes or resumes that run
        ├── SequenceConflictError    an event's sequence is not after the run's last stored one
        ├── StoreReadOnlyError       the database cannot be written (immutable file, read-only mount)
        ├── StoreFullError           the disk is full or the file-size limit was reached
        └── StoreCorruptError        SQLite found damaged pages; nothing more is written

Constructors take facts and build the message, so the text always names what to fix.
"""

from __future__ import annotations

__all__ = [
    "InvalidInputError",
    "RealmError",
    "RunClaimedError",
    "RunFailedError",
    "SequenceConflictError",
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
    ``<inline>``), ``line``/``column`` are 1-based where known.
    """

    def __init__(
        self,
        rule: str,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.rule = rule
        self.detail = message
        self.path = path
        self.line = line
        self.column = column
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
    """Raised when a workflow name or path does not resolve to a readable file."""


class InvalidInputError(WorkflowMcpError):
    """Raised when a caller's input is malformed (args JSON, a fake script, an option value)."""


class RealmError(WorkflowMcpError):
    """Raised when the Node worker cannot start, dies unexpectedly or breaks the message protocol."""


class RunFailedError(WorkflowMcpError):
    """Raised by ``RunHandle.result()`` when a run ends ``failed`` or ``cancelled``."""

    def __init__(self, run_id: str, status: str, message: str) -> None:
        self.run_id = run_id
        self.status = status
        self.message = message
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


class StoreReadOnlyError(StoreError):
    """Raised when something must be recorded but the state database cannot be written (``reason``)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"the state database {path} is read-only ({reason}): runs can be listed, shown and exported, "
            "but nothing new can be recorded. Make it writable, or point WORKFLOW_MCP_HOME at a writable "
            "directory"
        )


class StoreFullError(StoreError):
    """Raised when a write to the state database fails for lack of space.

    ``file_size_limit`` (bytes) is set when the process's file-size limit (``ulimit -f``,
    ``RLIMIT_FSIZE``) was reached; otherwise ``free_bytes`` is what the file system has left at
    ``directory``. The failed transaction is rolled back: every stored run stays readable.
    """

    def __init__(
        self, path: str, *, directory: str, free_bytes: int | None, file_size_limit: int | None = None
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
            "then resume the run (`workflow-mcp resume RUN_ID`)"
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
