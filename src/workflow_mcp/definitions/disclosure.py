"""What a diagnostic about a file may quote.

Loading errors quote the file they are about (``the file starts with `…```, ``unexpected `…```), which
is what an author needs, and also what someone who may not read a file would like to get: a server that
validates any path it is given would hand out the first line of ``/etc/shadow`` or of its own token file.
So a diagnostic quotes a file only when the file is a *workflow source*: its first statement is the meta
declaration (``export const meta = …``), read in full or broken only after it named ``meta``. Any other
file gets one error at its first problem's position that keeps the rule and quotes nothing, and no
warnings (they quote string literals). Inline sources are the caller's own text and are never redacted.
"""

from __future__ import annotations

from workflow_mcp.definitions._analysis import ValidationReport
from workflow_mcp.errors import WorkflowLoadError

__all__ = ["NOT_A_WORKFLOW", "is_workflow_source", "redacted"]

# Rules the meta reader applies only after it saw `export const meta` (definitions/_meta.py).
_AFTER_META_NAME = frozenset(
    {"meta-not-object", "meta-pure-literal", "meta-forbidden-key", "meta-name", "meta-description"}
)
# Messages that say nothing about the file's content.
_CONTENT_FREE = frozenset({"empty-file", "file-too-large", "source-too-large"})

NOT_A_WORKFLOW = (
    "the file is not a workflow source: it does not begin with `export const meta = { name: '…', "
    "description: '…' }` (only comments may come before it), so nothing of its content is quoted; "
    "open it at this position"
)
"""The message that replaces every diagnostic about a file that is not a workflow source."""


def is_workflow_source(report: ValidationReport) -> bool:
    """Whether the analysed file begins with the meta declaration (its diagnostics may quote it)."""
    return report.meta is not None or any(e.rule in _AFTER_META_NAME for e in report.errors)


def redacted(report: ValidationReport) -> ValidationReport:
    """``report`` unchanged for a workflow source or an inline source; for any other file, one error with
    the first problem's rule and position and :data:`NOT_A_WORKFLOW` as its message, and no warnings."""
    if report.path is None or not report.errors or is_workflow_source(report):
        return report
    first = report.errors[0]
    message = first.detail if first.rule in _CONTENT_FREE else NOT_A_WORKFLOW
    error = WorkflowLoadError(first.rule, message, path=first.path, line=first.line, column=first.column)
    return ValidationReport(valid=False, meta=None, errors=(error,), warnings=(), path=report.path)
