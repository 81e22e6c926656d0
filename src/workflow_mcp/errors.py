"""The exception tree of workflow-mcp.

    WorkflowMcpError                 root: every error this package raises on purpose
    ├── WorkflowLoadError            a workflow file or source broke a loading rule (rule, path, line, column)
    ├── WorkflowNotFoundError        a workflow name or path did not resolve
    ├── InvalidInputError            a caller gave bad input (args JSON, a fake script, an option)
    ├── RealmError                   the Node worker could not start, crashed or broke the protocol
    └── RunFailedError               a run ended failed (carries the run id and the message)

Constructors take facts and build the message, so the text always names what to fix.
"""

from __future__ import annotations

__all__ = [
    "InvalidInputError",
    "RealmError",
    "RunFailedError",
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
