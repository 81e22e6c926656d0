"""The loading analysis behind :mod:`workflow_mcp.definitions.load`, in two stages.

Private. Stage one (:func:`analyze_file`, :func:`analyze_source`) reads, decodes, parses, reads the meta
statement and scans the tree; stage two (:func:`finish`) asks V8 about every body still in question in
one realm call, or accepts tree-sitter's verdict when the syntax check is off. Discovery runs stage one
per file and stage two once for all of them. The public value types live here too and are re-exported
by ``load``.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workflow_mcp.definitions._js import Source, parse
from workflow_mcp.definitions._meta import WorkflowMeta, read_meta_statement
from workflow_mcp.definitions._scan import scan
from workflow_mcp.definitions.profile import Profile
from workflow_mcp.errors import WorkflowLoadError, WorkflowNotFoundError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tree_sitter import Node

    from workflow_mcp.realm.worker import SyntaxProblem

__all__ = [
    "Analysis",
    "ValidationReport",
    "Workflow",
    "WorkflowWarning",
    "analyze_file",
    "analyze_source",
    "apply_syntax_problem",
    "check_and_collate_bodies",
    "check_bodies",
    "finish",
    "finish_unchecked",
    "pending_bodies",
]


@dataclass(frozen=True)
class WorkflowWarning:
    """A portability or dependency note about a loadable workflow (never a reason to refuse it).

    ``rule`` is a stable id (``agent-type``, ``nested-workflow``, ``absolute-path``, …); ``line`` and
    ``column`` are 1-based (column in UTF-16 code units) or ``None``.
    """

    rule: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_json(self) -> dict[str, object]:
        """``{"rule", "message", "line", "column"}``."""
        return {"rule": self.rule, "message": self.message, "line": self.line, "column": self.column}


@dataclass(frozen=True)
class Workflow:
    """A loaded workflow definition, ready to run.

    Attributes:
        meta: the normalized metadata.
        source: the decoded text, unchanged (a leading BOM is kept as U+FEFF).
        body: ``source`` with the whole meta statement replaced by spaces (line breaks kept), so every
            line and column is unchanged; this is what the realm executes.
        path: the file it came from, or ``None`` for an inline source.
        source_hash: SHA-256 hex of the file's raw bytes (of the UTF-8 encoding for inline sources);
            approvals and run identity are keyed by it.
        warnings: dependency and portability warnings, in source order.
        profile: the name of the profile it was loaded under, e.g. ``claude-code/2.1.332``.
    """

    meta: WorkflowMeta
    source: str
    body: str
    path: str | None
    source_hash: str
    warnings: tuple[WorkflowWarning, ...]
    profile: str

    @property
    def name(self) -> str:
        """``meta.name``, the workflow's exact (case-sensitive, untrimmed) name."""
        return self.meta.name


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of :func:`validate_workflow`.

    ``valid`` is true when ``errors`` is empty. ``meta`` is the normalized metadata whenever the meta
    statement itself was acceptable (even if another rule failed), else ``None``.
    """

    valid: bool
    meta: WorkflowMeta | None
    errors: tuple[WorkflowLoadError, ...]
    warnings: tuple[WorkflowWarning, ...]
    path: str | None = None

    def to_json(self) -> dict[str, object]:
        """``{"valid": bool, "meta": dict | None, "errors": [WorkflowLoadError.to_json()],
        "warnings": [WorkflowWarning.to_json()]}``."""
        return {
            "valid": self.valid,
            "meta": self.meta.to_json() if self.meta is not None else None,
            "errors": [e.to_json() for e in self.errors],
            "warnings": [w.to_json() for w in self.warnings],
        }


class Analysis:
    """Private: everything learned about one source before and after the V8 syntax check."""

    __slots__ = (
        "body",
        "errors",
        "meta",
        "parse_error",
        "path",
        "profile",
        "source",
        "source_hash",
        "warnings",
    )

    def __init__(self, path: str | None, profile: Profile, source: str = "") -> None:
        self.path = path
        self.profile = profile
        self.source = source
        self.source_hash = ""
        self.meta: WorkflowMeta | None = None
        self.body: str | None = None  # set once the meta statement is read
        self.errors: list[WorkflowLoadError] = []
        self.warnings: list[WorkflowWarning] = []
        # A tree-sitter error after the meta statement: V8 decides whether the code is really broken.
        self.parse_error: WorkflowLoadError | None = None

    @property
    def needs_syntax_check(self) -> bool:
        return not self.errors and self.body is not None

    def to_workflow(self) -> Workflow:
        assert self.meta is not None and self.body is not None and not self.errors
        return Workflow(
            meta=self.meta,
            source=self.source,
            body=self.body,
            path=self.path,
            source_hash=self.source_hash,
            warnings=tuple(self.warnings),
            profile=self.profile.name,
        )

    def report(self) -> ValidationReport:
        return ValidationReport(
            valid=not self.errors,
            meta=self.meta,
            errors=tuple(self.errors),
            warnings=tuple(self.warnings),
            path=self.path,
        )


def analyze_file(path: str, profile: Profile) -> Analysis:
    """Stage one for a file: read (limits, UTF-8), parse, read meta, scan. No V8 yet.

    Raises:
        WorkflowNotFoundError: missing, unreadable or not a regular file.
    """
    analysis = Analysis(path=path, profile=profile)
    try:
        data = _read_file(path, profile)
    except WorkflowLoadError as exc:
        analysis.errors.append(exc)
        return analysis
    analysis.source_hash = hashlib.sha256(data).hexdigest()
    try:
        analysis.source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = Source(data).offset_position(exc.start)
        analysis.errors.append(
            WorkflowLoadError(
                "not-utf8",
                f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "save it with UTF-8 encoding",
                path=path,
                line=line,
                column=column,
            )
        )
        return analysis
    _analyze_text(analysis, data)
    return analysis


def analyze_source(source: str, profile: Profile, *, label: str | None = None) -> Analysis:
    """Stage one for inline text (``label`` names it in messages)."""
    analysis = Analysis(path=label, profile=profile, source=source)
    units = len(source.encode("utf-16-le", "surrogatepass")) // 2
    if units > profile.max_inline_code_units:
        analysis.errors.append(
            WorkflowLoadError(
                "source-too-large",
                f"the inline source is {units:,} UTF-16 code units; profile {profile.name} allows at most "
                f"{profile.max_inline_code_units:,}. Split it into nested workflows or pass data "
                "through args",
                path=label,
            )
        )
        return analysis
    try:
        data = source.encode("utf-8")
    except UnicodeEncodeError as exc:
        analysis.errors.append(
            WorkflowLoadError(
                "not-utf8",
                f"the inline source contains the lone surrogate U+{ord(source[exc.start]):04X} at index "
                f"{exc.start}, which has no UTF-8 form; remove it or pair it",
                path=label,
            )
        )
        return analysis
    analysis.source_hash = hashlib.sha256(data).hexdigest()
    _analyze_text(analysis, data)
    return analysis


def _read_file(path: str, profile: Profile) -> bytes:
    limit = profile.max_file_bytes
    # O_NONBLOCK: opening a FIFO must not hang; a non-regular file is refused right after.
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise WorkflowNotFoundError(f"workflow file not found: {path}; check the path") from None
    except OSError as exc:
        raise WorkflowNotFoundError(f"cannot open workflow file {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise WorkflowNotFoundError(
                f"{path} is not a regular file (a directory, device or pipe); "
                "give the path of a workflow file"
            )
        if info.st_size > limit:
            raise _too_large(path, info.st_size, profile)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise WorkflowNotFoundError(f"cannot read workflow file {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:  # the file grew after fstat
        raise _too_large(path, len(data), profile)
    return data


def _too_large(path: str, size: int, profile: Profile) -> WorkflowLoadError:
    return WorkflowLoadError(
        "file-too-large",
        f"the file is {size:,} bytes; profile {profile.name} allows at most {profile.max_file_bytes:,} bytes "
        "per workflow file (counted before decoding). Split it into nested workflows or pass data "
        "through args",
        path=path,
    )


def _analyze_text(analysis: Analysis, data: bytes) -> None:
    src = Source(data)
    root = parse(data).root_node
    path = analysis.path
    first_error = _first_error(root) if root.has_error else None
    meta_readable = True
    if first_error is not None:
        problem = _parse_error(first_error, src, path)
        first = next((c for c in root.named_children if c.type not in ("comment", "hash_bang_line")), None)
        if first is None or first_error.start_byte < first.end_byte:
            analysis.errors.append(problem)  # the meta statement itself does not parse
            meta_readable = False
        else:
            analysis.parse_error = problem
    if meta_readable:
        try:
            statement = read_meta_statement(root, src, path, analysis.profile)
        except WorkflowLoadError as exc:
            analysis.errors.append(exc)
        else:
            analysis.meta = statement.meta
            # The meta statement becomes blank space (line breaks kept, so every position stays put):
            # Claude Code 2.1.332 extracts it, and `typeof meta` is 'undefined' in the body.
            at = len(data[: statement.export_start].decode("utf-8"))
            end = len(data[: statement.statement_end].decode("utf-8"))
            blank = "".join(ch if ch in "\r\n\u2028\u2029" else " " for ch in analysis.source[at:end])
            analysis.body = analysis.source[:at] + blank + analysis.source[end:]
            for message, node in statement.dropped:
                line, column = src.position(node)
                analysis.warnings.append(WorkflowWarning("meta-discarded", message, line, column))
            for key, node in statement.duplicates:
                line, column = src.position(node)
                analysis.warnings.append(
                    WorkflowWarning(
                        "meta-duplicate-key",
                        f"meta repeats the key {key!r}; the last value wins, as in JavaScript — remove the "
                        "earlier one",
                        line,
                        column,
                    )
                )
    profile = analysis.profile
    for finding in scan(root, src, import_refused=profile.import_refused_at_load, profile=profile.name):
        if finding.error:
            analysis.errors.append(
                WorkflowLoadError(
                    finding.rule, finding.message, path=path, line=finding.line, column=finding.column
                )
            )
        else:
            analysis.warnings.append(
                WorkflowWarning(finding.rule, finding.message, finding.line, finding.column)
            )
    _sort(analysis)


def _sort(analysis: Analysis) -> None:
    analysis.errors.sort(key=lambda e: (e.line or 0, e.column or 0))
    analysis.warnings.sort(key=lambda w: (w.line or 0, w.column or 0))


def _first_error(root: Node) -> Node:
    node = root
    while not (node.is_error or node.is_missing):
        child = next((c for c in node.children if c.has_error or c.is_missing or c.is_error), None)
        if child is None:
            return node
        node = child
    return node


def _parse_error(node: Node, src: Source, path: str | None) -> WorkflowLoadError:
    parent = node.parent
    if node.is_missing:
        message = f"syntax error: expected `{node.type}` here"
        at = node
    elif parent is not None and parent.type == "string" and "\n" in src.text(parent):
        message = (
            "syntax error: a string literal cannot contain a line break; end it on the same line, use \\n, "
            "a backslash at the end of the line, or a template literal"
        )
        at = parent
    elif parent is not None and parent.type in ("string", "template_string"):
        message = "syntax error: this literal does not parse (a malformed escape sequence?)"
        at = parent
    else:
        text = src.text(node).strip().split("\n", 1)[0]
        text = text if len(text) <= 30 else text[:27] + "..."
        message = f"syntax error: unexpected `{text}`" if text else "syntax error"
        at = node
    line, column = src.position(at)
    return WorkflowLoadError("syntax", message, path=path, line=line, column=column)


def pending_bodies(analyses: Sequence[Analysis]) -> list[Analysis]:
    """The analyses that still need the V8 syntax check."""
    return [a for a in analyses if a.needs_syntax_check]


def syntax_error(body: str, path: str | None, problem: SyntaxProblem) -> WorkflowLoadError:
    """The ``syntax`` load error for V8's ``problem`` with ``body`` (positions in the file)."""
    message, line, column = problem.message, problem.line, problem.column
    lines = _LINE_BREAK.split(body)
    if "Maximum call stack size exceeded" in message:
        # V8's parser recurses too: a body nested thousands of brackets deep overflows its stack,
        # wherever V8 happened to be when it gave up.
        message = (
            "the code is nested too deeply for V8's parser (Maximum call stack size exceeded); "
            "flatten the deepest brackets or build the value in a loop"
        )
        if line is not None and line > len(lines):
            line, column = len(lines), 1
    elif line is not None and line > len(lines):
        # The realm wraps the body in a function; an error in the wrapper's closing text means the
        # file ended in the middle of something (an unclosed bracket, string or comment).
        message = f"the file ends in the middle of a statement or bracket (V8: {message})"
        line, column = len(lines), len(lines[-1].encode("utf-16-le", "surrogatepass")) // 2 + 1
    return WorkflowLoadError(
        "syntax",
        f"syntax error: {message} (V8 compiles the script as strict-mode code with top-level "
        "await and return allowed); fix the code at this position",
        path=path,
        line=line,
        column=column,
    )


def apply_syntax_problem(analysis: Analysis, problem: SyntaxProblem | None) -> None:
    """Stage two with V8's verdict on ``analysis.body``."""
    if problem is not None:
        analysis.errors.append(syntax_error(analysis.body or "", analysis.path, problem))
    elif analysis.parse_error is not None:
        error = analysis.parse_error
        analysis.warnings.append(
            WorkflowWarning(
                "parser-gap",
                "the tree-sitter grammar could not parse this region although V8 compiles it, so the checks "
                "for import(), await using and dependency warnings may have missed something here",
                error.line,
                error.column,
            )
        )
    _sort(analysis)


_LINE_BREAK = re.compile("\r\n|[\r\n\u2028\u2029]")


def finish_unchecked(analysis: Analysis) -> None:
    """Stage two without V8: a tree-sitter parse error is the verdict."""
    if analysis.parse_error is not None:
        analysis.errors.append(analysis.parse_error)
        _sort(analysis)


def finish(analyses: Sequence[Analysis], *, check_syntax: bool) -> None:
    """Stage two for ``analyses``: one realm call compiles every body still in question."""
    pending = pending_bodies(analyses) if check_syntax else []
    if pending:
        for analysis, problem in zip(pending, check_bodies([a.body or "" for a in pending]), strict=True):
            apply_syntax_problem(analysis, problem)
    checked = {id(a) for a in pending}
    for analysis in analyses:
        if id(analysis) not in checked:
            finish_unchecked(analysis)


# V8 verdicts by body hash: a long-lived process (the MCP server, repeated discovery) compiles an
# unchanged body once. Bounded; a verdict depends only on the text and the bundled Node.
_VERDICTS: OrderedDict[str, SyntaxProblem | None] = OrderedDict()
_VERDICTS_MAX = 1024
_VERDICTS_LOCK = threading.Lock()
# Name lists in localeCompare order, keyed by the sorted names.
_COLLATED: OrderedDict[tuple[str, ...], list[str]] = OrderedDict()
_COLLATED_MAX = 64


def check_bodies(bodies: Sequence[str]) -> list[SyntaxProblem | None]:
    """V8's verdict on each body, from the cache or one realm call.

    Raises:
        RealmError: the Node worker could not run.
    """
    problems, _ = check_and_collate_bodies(bodies, None)
    return problems


def check_and_collate_bodies(
    bodies: Sequence[str], names: Sequence[str] | None
) -> tuple[list[SyntaxProblem | None], list[str] | None]:
    """V8's verdict on each body and, when ``names`` is given, ``names`` sorted with JavaScript
    ``localeCompare`` — in at most one realm call.

    Raises:
        RealmError: the Node worker could not run.
    """
    keys = [hashlib.sha256(b.encode("utf-8", "surrogatepass")).hexdigest() for b in bodies]
    with _VERDICTS_LOCK:
        verdicts = {k: _VERDICTS[k] for k in keys if k in _VERDICTS}
    missing = {k: b for k, b in zip(keys, bodies, strict=True) if k not in verdicts}
    ordered: list[str] | None = None
    if missing:
        from workflow_mcp.realm import worker

        if names is not None and len(names) > 1:
            problems, ordered = worker.check_and_collate(list(missing.values()), names)
        else:
            problems = worker.check_syntax(list(missing.values()))
        verdicts.update(zip(missing, problems, strict=True))
    with _VERDICTS_LOCK:
        for key, problem in verdicts.items():
            _VERDICTS[key] = problem
            _VERDICTS.move_to_end(key)
        while len(_VERDICTS) > _VERDICTS_MAX:
            _VERDICTS.popitem(last=False)
    if names is not None:
        names_key = tuple(sorted(names))
        if ordered is None:
            with _VERDICTS_LOCK:
                ordered = _COLLATED.get(names_key)
        if ordered is None:
            if len(names) > 1:
                from workflow_mcp.realm import worker

                ordered = worker.collate(names)
            else:
                ordered = list(names)
        with _VERDICTS_LOCK:
            _COLLATED[names_key] = ordered
            _COLLATED.move_to_end(names_key)
            while len(_COLLATED) > _COLLATED_MAX:
                _COLLATED.popitem(last=False)
        ordered = list(ordered)
    return [verdicts[k] for k in keys], ordered
