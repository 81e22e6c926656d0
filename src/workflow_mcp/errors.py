"""The exception tree of workflow-mcp.

    WorkflowMcpError                 root: every error this package raises on purpose
    ├── WorkflowLoadError            a workflow file or source broke a loading rule (rule, path, line, column)
    ├── WorkflowNotFoundError        a workflow name or path did not resolve
    ├── InvalidInputError            a caller gave bad input (args JSON, a fake script, an option)
    │   └── PathRefusedError         a path lies outside the server's project roots or in its state directory
    ├── SourceNotApprovedError       a workflow source (a nested child too) was never approved to run
    ├── RealmError                   the Node worker could not start, crashed or broke the protocol
    └── RunFailedError               a run ended failed (carries the run id and the message)

Constructors take facts and build the message, so the text always names what to fix.
"""

from __future__ import annotations

__all__ = [
    "InvalidInputError",
    "PathRefusedError",
    "RealmError",
    "RunFailedError",
    "SourceNotApprovedError",
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


class RunFailedError(WorkflowMcpError):
    """Raised by ``RunHandle.result()`` when a run ends ``failed`` or ``cancelled``."""

    def __init__(self, run_id: str, status: str, message: str) -> None:
        self.run_id = run_id
        self.status = status
        self.message = message
        super().__init__(message)
