"""Which files the MCP tools may reach (:class:`FileScope`) and the nested-workflow check built on it
and on source approval (:class:`ChildGate`).

Every tool, resource and run argument that names a file or directory — ``path``, ``cwd``, a workflow
``name`` (through the file it resolves to), the ``workflow({scriptPath})`` and ``workflow(name)``
children of a run — goes through one :class:`FileScope`:

* ``state-dir`` (every transport): nothing inside the state directory (``$WORKFLOW_MCP_HOME``: the
  bearer tokens, the approvals, every run) is reachable, even when it lies inside a root;
* ``outside-roots`` (Streamable HTTP, ``confined``): a path resolves only inside the project roots —
  the ``--trust`` directories and the server's working directory. Symbolic links are resolved
  (``realpath``) before the check, and the file is then read through its real path, so a link inside a
  root that points outside is refused like the target itself. The local user of a stdio server may reach
  any other path, as the CLI may;
* ``malformed-path``: a path holding a NUL character.

Names resolve through a discovery that is handed :meth:`FileScope.allows` and reads nothing else, so a
definition outside the scope is invisible rather than refused (its existence is not disclosed either).

What a diagnostic may quote of a file is decided by :mod:`workflow_mcp.definitions.disclosure`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import (
    InvalidInputError,
    PathRefusedError,
    SourceNotApprovedError,
    WorkflowMcpError,
    WorkflowNotFoundError,
)
from ._policy import SourceTrust

__all__ = ["ChildGate", "FileScope"]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class FileScope:
    """The files tools may reach. ``roots`` and ``state_dir`` are real paths; ``confined`` confines every
    path to ``roots`` (HTTP); unconfined, only ``state_dir`` is out of reach (stdio)."""

    roots: tuple[str, ...] = ()
    state_dir: str | None = None
    confined: bool = False

    @classmethod
    def of(
        cls, *, cwd: str, trust_dirs: tuple[str, ...] = (), state_dir: str | None, confined: bool
    ) -> FileScope:
        """The scope of a server serving ``cwd`` and trusting ``trust_dirs`` (symbolic links resolved).

        Raises:
            InvalidInputError: a root lies inside the state directory, so nothing in it could be reached
                (the message names both and says to give the state a directory of its own).
        """
        roots: list[str] = []
        for d in (cwd, *trust_dirs):
            real = os.path.realpath(os.path.expanduser(d))
            if real not in roots:
                roots.append(real)
        state = os.path.realpath(os.path.expanduser(state_dir)) if state_dir else None
        for root in roots:
            if state is not None and _inside(root, state):
                raise InvalidInputError(
                    f"the server's state directory {state} contains its project root {root}, and no tool may "
                    "reach the state directory, so nothing in the project could be read. Keep the state apart "
                    "from projects: set WORKFLOW_MCP_HOME to a directory of its own (default ~/.workflow-mcp), "
                    "or serve from a directory outside it"
                )
        return cls(roots=tuple(roots), state_dir=state, confined=confined)

    def resolve(self, raw: str, base: str) -> str:
        """The real path of ``raw`` (``~`` expanded, relative to ``base``) when it may be reached.

        Raises:
            PathRefusedError: rule ``malformed-path``, ``state-dir`` or ``outside-roots`` (the message
                names the roots).
        """
        if "\x00" in raw:
            raise PathRefusedError("malformed-path", raw)
        real = os.path.realpath(os.path.join(base, os.path.expanduser(raw)))
        self.check(real, shown=raw)
        return real

    def check(self, real: str, *, shown: str | None = None) -> None:
        """Refuse the real path ``real`` when it may not be reached (``shown`` is what the caller named).

        Raises:
            PathRefusedError: rule ``state-dir`` or ``outside-roots``.
        """
        if self.state_dir is not None and _inside(real, self.state_dir):
            raise PathRefusedError("state-dir", shown or real, state_dir=self.state_dir)
        if self.confined and not any(_inside(real, root) for root in self.roots):
            raise PathRefusedError("outside-roots", shown or real, roots=self.roots)

    def not_found(self, error: WorkflowNotFoundError) -> WorkflowNotFoundError:
        """``error`` (discovery found no reachable definition of a name), saying where names resolve when
        the scope is confined: a workflow outside the roots (e.g. a personal one) is invisible, not
        refused, so that its existence is not disclosed."""
        if not self.confined:
            return error
        return WorkflowNotFoundError(
            f"{error}; over HTTP only workflows inside this server's project roots ({', '.join(self.roots)}) "
            "are visible [outside-roots]"
        )

    def allows(self, path: str) -> bool:
        """Whether ``path`` (symbolic links resolved here) may be reached."""
        try:
            self.check(os.path.realpath(path))
        except PathRefusedError:
            return False
        return True


@dataclass(frozen=True)
class ChildGate:
    """The :class:`~workflow_mcp.service.ChildCheck` of runs started through MCP: a nested child must be
    reachable in the server's :class:`FileScope` and approved by the same :class:`SourceTrust` as any
    workflow (a ``--trust`` directory holding its real path, or its SHA-256 approved by the run's owner)."""

    scope: FileScope
    trust: SourceTrust
    owner: str | None = None
    """The owner of the run whose children this gate judges: only that principal's approvals count."""

    def of(self, owner: str | None) -> ChildGate:
        """This gate for the runs of ``owner``."""
        return replace(self, owner=owner)

    def readable(self, path: str) -> None:
        self.scope.check(path)

    def runnable(self, name: str, path: str, source_hash: str) -> None:
        if not self.trust.allows(source_hash, path, self.owner):
            raise SourceNotApprovedError(name, path, source_hash, nested=True)

    def not_found(self, error: WorkflowNotFoundError) -> WorkflowMcpError:
        return self.scope.not_found(error)
