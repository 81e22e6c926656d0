"""Nested ``workflow()`` resolution (profile claude-code/2.1.332, PROFILE-FACTS "Nested workflow()").

``workflow(name, args)`` resolves through discovery (personal and project directories, nearest
wins); ``workflow({scriptPath}, args)`` loads a file (relative paths from the run's cwd). Each call of
the same child gets its own synthetic phase: ``▸ name``, then ``▸ name #2``, ``▸ name #3``…
Unknown names, unreadable paths, invalid children and children a :class:`ChildCheck` refuses raise,
which rejects the parent's call.

A child is read from its real path (symbolic links resolved), the path the check was asked about; a
child by name is found by a discovery that reads only the files the check allows (so a not-found message
never names one it refuses). Resolution reads files and may compile them in V8: the coordinator runs it
in a worker thread, one call at a time in call order (so ``#2`` numbering follows the calls). A
load error about a file that is not a workflow source quotes nothing of it
(:mod:`workflow_mcp.definitions.disclosure`), so ``workflow({scriptPath: args.path})`` in a trusted
workflow cannot be used to read other files through the rejection message.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..definitions.profile import Profile
from ..errors import WorkflowLoadError, WorkflowMcpError, WorkflowNotFoundError

__all__ = ["ChildCheck", "ChildResolver", "ChildWorkflow"]


class ChildCheck(Protocol):
    """The host's say on every nested workflow, asked before the child is read and before it runs (the
    MCP server passes its file scope and source approval here; the engine itself allows everything)."""

    def readable(self, path: str) -> None:
        """Raise a ``WorkflowMcpError`` when the file or directory at ``path`` (a real path) may not be read
        (discovery also asks about each workflow directory and file before listing or reading it)."""

    def runnable(self, name: str, path: str, source_hash: str) -> None:
        """Raise a ``WorkflowMcpError`` when the loaded child (``path`` real, ``source_hash`` SHA-256 of
        its bytes) may not run."""

    def not_found(self, error: WorkflowNotFoundError) -> WorkflowMcpError:
        """The error to raise when no readable definition has the child's name (``error`` is
        discovery's; the host may add where names resolve)."""


@dataclass(frozen=True)
class ChildWorkflow:
    name: str
    phase: str
    body: str
    path: str
    source: str = ""


class ChildResolver:
    def __init__(self, cwd: str, home: str | None, profile: Profile, check: ChildCheck | None = None) -> None:
        self.cwd = cwd
        self.home = home
        self.profile = profile
        self.check = check
        self._calls: dict[str, int] = {}

    def resolve(self, target: dict[str, Any]) -> ChildWorkflow:
        """Load the child named by ``target`` (``{"name"}`` or ``{"scriptPath"}``).

        Raises:
            WorkflowNotFoundError: unknown name or missing file.
            WorkflowLoadError: the child file breaks a loading rule.
            WorkflowMcpError: the :class:`ChildCheck` refused it (e.g. ``PathRefusedError``,
                ``SourceNotApprovedError``).
        """
        from ..definitions.discover import resolve_workflow
        from ..definitions.load import load_workflow

        check = self.check
        if "scriptPath" in target:
            if "\x00" in str(target["scriptPath"]):
                raise WorkflowNotFoundError(
                    f"workflow scriptPath {target['scriptPath']!r} is not a path: it holds a NUL character"
                )
            path = os.path.join(self.cwd, os.path.expanduser(str(target["scriptPath"])))
            real = os.path.realpath(path)
            if check is not None:
                check.readable(real)
            if not os.path.isfile(real):
                raise WorkflowNotFoundError(
                    f"workflow scriptPath {target['scriptPath']!r} is not a readable file"
                )
            try:
                wf = load_workflow(real, profile=self.profile)
            except WorkflowLoadError as exc:
                shown = _quotable(exc, real, self.profile)
                raise WorkflowLoadError(
                    shown.rule,
                    f"nested workflow: {shown.detail}",
                    path=shown.path,
                    line=shown.line,
                    column=shown.column,
                ) from None
            visible = wf.meta.name
        else:
            # Discovery reads only what the check allows, so an unreadable file is neither a candidate
            # nor named in a not-found message; invalid files are diagnostics there, never raised.
            try:
                found = resolve_workflow(
                    str(target.get("name", "")),
                    self.cwd,
                    self.home,
                    profile=self.profile,
                    reachable=None if check is None else _reachable(check),
                )
            except WorkflowNotFoundError as exc:
                error = _not_found(exc, self.profile)
                if check is None:
                    raise error from None
                raise check.not_found(error) from None
            # A plugin's workflow logs and groups under its visible name, `<plugin>:<name>` (measured).
            wf, visible = found.workflow, found.name
            path = str(wf.path)
            real = os.path.realpath(path)
            if check is not None:
                check.readable(real)  # the same answer unless a link changed since discovery asked
        if self.check is not None:
            self.check.runnable(visible, real, wf.source_hash)
        n = self._calls.get(visible, 0) + 1
        self._calls[visible] = n
        phase = f"▸ {visible}" if n == 1 else f"▸ {visible} #{n}"
        return ChildWorkflow(name=visible, phase=phase, body=wf.body, path=path, source=wf.source)


_PARSE_HINT = (
    "Workflow scripts must be plain JavaScript — common causes are TypeScript syntax (type annotations, "
    "interfaces, generics) and broken string quoting or escaping."
)


def _not_found(exc: WorkflowNotFoundError, profile: Profile) -> WorkflowNotFoundError:
    """How ``workflow(name)`` rejects when discovery does not resolve ``name``, in Claude's words
    (profile claude-code/2.1.332, measured: case ``errors-child-resolution-messages``):
    ``workflow('<name>'): no workflow with that name. Available: <names in localeCompare order>``, or,
    for a file whose meta reads but whose code does not parse, ``workflow('<name>'): Script parse error:
    <message> (<line>:<column from 0>)``, the line, a caret under the column and Claude's hint. The
    parser's message is V8's (Claude's parser words some errors differently); Claude's list also starts
    with its bundled workflows, which do not exist here. A file that declares the name but breaks
    another loading rule adds a line saying so."""
    name = exc.name if exc.name is not None else ""
    head = f"workflow('{name}'): "
    invalid = exc.invalid
    if profile.child_parse_error_at_call and invalid is not None and invalid.rule == "syntax":
        message = f"{head}Script parse error: {invalid.engine_message or invalid.detail}"
        if invalid.line is not None:
            column = max((invalid.column or 1) - 1, 0)
            message += f" ({invalid.line}:{column})"
            if invalid.excerpt is not None:
                message += f"\n\n{invalid.excerpt}\n{' ' * column}^"
        message += "\n\n" + _PARSE_HINT
    else:
        listed = (
            ", ".join(exc.available)
            if exc.available
            else "none (put .js files in .claude/workflows or ~/.claude/workflows)"
        )
        message = f"{head}no workflow with that name. Available: {listed}"
        if invalid is not None and invalid.rule != "syntax":
            message += f"\n{invalid.path} declares it but is invalid: {invalid.detail} [{invalid.rule}]"
    return WorkflowNotFoundError(message, name=exc.name, available=exc.available, invalid=invalid)


def _reachable(check: ChildCheck) -> Callable[[str], bool]:
    """``check.readable`` as the predicate discovery takes."""

    def reachable(path: str) -> bool:
        try:
            check.readable(path)
        except WorkflowMcpError:
            return False
        return True

    return reachable


def _quotable(exc: WorkflowLoadError, path: str, profile: Profile) -> WorkflowLoadError:
    """``exc``, or its redacted form when ``path`` is not a workflow source."""
    from ..definitions.disclosure import redacted
    from ..definitions.load import validate_workflow

    if not path:
        return exc
    try:
        report = validate_workflow(path, profile=profile, check_syntax=False)
    except WorkflowNotFoundError:
        return exc
    shown = redacted(report)
    return exc if shown is report else shown.errors[0]
