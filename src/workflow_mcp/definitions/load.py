"""Load and validate one workflow file: limits, decoding, the meta statement, refused constructs, syntax.

:func:`load_workflow` returns a :class:`Workflow` or raises; :func:`validate_workflow` returns a
:class:`ValidationReport` that lists every problem found instead. Nothing here runs the workflow: the
realm only compiles the body to check its syntax.

Rules and where they come from (profile claude-code/2.1.332 unless said otherwise):

==========================  ===========================================================================
rule                        what breaks it
==========================  ===========================================================================
``file-too-large``          a file over 524,288 bytes, counted before decoding
``source-too-large``        an inline source over 524,288 UTF-16 code units
``not-utf8``                bytes that are not UTF-8 (or an inline source with a lone surrogate)
``empty-file``              nothing but whitespace
``meta-first-statement``    the first statement is not ``export const meta = …`` (wrong name too)
``meta-not-const``          ``export let meta`` / ``export var meta``
``meta-single-declarator``  ``export const meta = {…}, other = 1``
``meta-not-object``         the initializer is not an object literal (a call, an array, nothing)
``meta-pure-literal``       a value that is not a pure literal (see ``_meta``)
``meta-forbidden-key``      a ``__proto__``, ``constructor`` or ``prototype`` key at any depth
``meta-too-deep``           meta nested deeper than 4,000 arrays, objects and parentheses (Claude
                            Code's recursive parser overflows between 6,000 and 7,000, measured;
                            2.1.209: 2,000, as it overflows between 3,000 and 4,000)
``meta-lone-surrogate``     a meta string or key holding an unpaired ``\\uD800``-``\\uDFFF`` escape: it has
                            no UTF-8 form (no store, JSON-RPC message or terminal carries it), and
                            Claude Code 2.1.332 lists such a name but cannot launch the workflow
``meta-name``               ``name`` missing, not a string, or empty
``meta-description``        ``description`` missing, not a string, or empty
``dynamic-import``          a real ``import()`` call (2.1.332 refuses it at load; 2.1.209: a warning)
``await-using``             an ``await using`` declaration
``with-statement``          a ``with`` statement (module code is strict)
``syntax``                  anything V8 will not compile as a strict async function body
==========================  ===========================================================================

Warnings never refuse a file: ``agent-type``, ``nested-workflow``, ``nested-script-path``,
``absolute-path``, ``nondeterministic-call``, ``meta-duplicate-key``, ``dynamic-import`` (2.1.209) and
``parser-gap`` (tree-sitter could not parse a region V8 accepts).

Positions are 1-based; columns count UTF-16 code units (as V8 and editors using LSP do).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workflow_mcp.definitions._analysis import (
    Analysis,
    ValidationReport,
    Workflow,
    WorkflowWarning,
    analyze_file,
    analyze_source,
    apply_syntax_problems,
    finish,
    syntax_error,
)
from workflow_mcp.definitions._meta import Phase, WorkflowMeta
from workflow_mcp.definitions.profile import Profile, get_profile

if TYPE_CHECKING:
    from workflow_mcp.realm.worker import SyntaxProblem

__all__ = [
    "PendingWorkflow",
    "Phase",
    "ValidationReport",
    "Workflow",
    "WorkflowMeta",
    "WorkflowWarning",
    "load_workflow",
    "prepare_workflow",
    "syntax_error",
    "validate_workflow",
]

StrPath = str | os.PathLike[str]


def load_workflow(
    path: StrPath | None = None,
    *,
    source: str | None = None,
    profile: Profile | str | None = None,
    check_syntax: bool = True,
) -> Workflow:
    """Load the workflow file at ``path``, or the inline ``source`` text.

    With both, ``source`` is loaded and ``path`` only names it in messages. ``check_syntax=False`` skips
    the V8 compile (tree-sitter still catches most syntax errors); use it only where Node is absent.

    Raises:
        WorkflowNotFoundError: the path does not exist or is not a readable regular file.
        WorkflowLoadError: the first broken rule, in source order (see the module docstring).
        RealmError: the Node worker needed for the syntax check could not run.
        ValueError: neither ``path`` nor ``source`` was given.
    """
    analysis = _analyze_one(path, source, _profile(profile), check_syntax=check_syntax)
    if analysis.errors:
        raise analysis.errors[0]
    return analysis.to_workflow()


def validate_workflow(
    path: StrPath | None = None,
    *,
    source: str | None = None,
    profile: Profile | str | None = None,
    check_syntax: bool = True,
) -> ValidationReport:
    """Check the workflow at ``path`` (or inline ``source``) against every loading rule, without raising
    for rule violations. Arguments as for :func:`load_workflow`.

    Raises:
        WorkflowNotFoundError: the path does not exist or is not a readable regular file.
        RealmError: the Node worker needed for the syntax check could not run.
    """
    return _analyze_one(path, source, _profile(profile), check_syntax=check_syntax).report()


class PendingWorkflow:
    """A workflow that passed every static rule and waits for V8's verdict on :attr:`sources`.

    For callers that compile in a realm worker of their own (the CLI checks the syntax in the run's
    worker, so a run starts one Node process): compile each of ``sources`` as
    :func:`workflow_mcp.realm.worker.check_syntax` does, then call :meth:`complete` with the verdicts.
    The verdict and its wording are exactly :func:`load_workflow`'s.
    """

    __slots__ = ("_analysis", "_workflow")

    def __init__(self, analysis: Analysis | None = None, workflow: Workflow | None = None) -> None:
        self._analysis = analysis
        self._workflow = workflow

    @classmethod
    def of(cls, workflow: Workflow) -> PendingWorkflow:
        """An already checked workflow (``sources`` is empty; :meth:`complete` returns it)."""
        return cls(workflow=workflow)

    @property
    def sources(self) -> list[str]:
        """The texts to compile: the body, and a marked copy when V8 must confirm what is code."""
        return self._analysis.syntax_sources() if self._analysis is not None else []

    def complete(self, problems: Sequence[SyntaxProblem | None]) -> Workflow:
        """The loaded workflow, given V8's verdict on each of :attr:`sources` (in order).

        Raises:
            WorkflowLoadError: V8 refused the body, or read as code what the static checks read as text.
        """
        if self._workflow is not None:
            return self._workflow
        analysis = self._analysis
        assert analysis is not None
        apply_syntax_problems(analysis, problems)
        if analysis.errors:
            raise analysis.errors[0]
        self._workflow = analysis.to_workflow()
        return self._workflow


def prepare_workflow(
    path: StrPath | None = None, *, source: str | None = None, profile: Profile | str | None = None
) -> PendingWorkflow:
    """Stage one of :func:`load_workflow`: every rule but V8's, which the caller runs (see
    :class:`PendingWorkflow`). Arguments as for :func:`load_workflow`.

    Raises:
        WorkflowNotFoundError: the path does not exist or is not a readable regular file.
        WorkflowLoadError: the meta statement itself breaks a rule (other static errors are raised
            by :meth:`PendingWorkflow.complete`, after V8's verdict, in source order).
        ValueError: neither ``path`` nor ``source`` was given.
    """
    prof = _profile(profile)
    if source is not None:
        analysis = analyze_source(source, prof, label=os.fspath(path) if path is not None else None)
    elif path is not None:
        analysis = analyze_file(os.fspath(path), prof)
    else:
        raise ValueError("prepare_workflow() needs a path or source=")
    if not analysis.needs_syntax_check:
        raise analysis.errors[0]
    return PendingWorkflow(analysis)


def _profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def _analyze_one(
    path: StrPath | None, source: str | None, profile: Profile, *, check_syntax: bool
) -> Analysis:
    if source is not None:
        label = os.fspath(path) if path is not None else None
        analysis = analyze_source(source, profile, label=label)
    elif path is not None:
        analysis = analyze_file(os.fspath(path), profile)
    else:
        raise ValueError("load_workflow() needs a path or source=")
    finish([analysis], check_syntax=check_syntax)
    return analysis
