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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workflow_mcp.definitions._js import Source, parse
from workflow_mcp.definitions._lexical import Mark, find_marks, marked_text
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
    "apply_syntax_problems",
    "check_analyses",
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
    ``column`` are 1-based (column in UTF-16 code units) or ``None``. ``subject`` is what a dependency
    warning is about, as data (the ``agentType`` value, the nested workflow name or script path), or
    ``None``; it is not part of :meth:`to_json` (the message names it).
    """

    rule: str
    message: str
    line: int | None = None
    column: int | None = None
    subject: str | None = field(default=None, compare=False)

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
        "mark_positions",
        "mark_v8_positions",
        "marked_body",
        "marks",
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
        # Words tree-sitter reads as text; V8 must agree (see _lexical). `marked_body` is the body with
        # each of them overwritten, compiled after the body itself.
        self.marks: list[Mark] = []
        self.marked_body: str | None = None
        self.mark_positions: list[tuple[int, int]] = []
        self.mark_v8_positions: list[tuple[int, int]] = []

    @property
    def needs_syntax_check(self) -> bool:
        # Also when a static rule already refused the file: V8, not tree-sitter, says whether the body
        # has a syntax error, so every caller reports the same errors in the same order.
        return self.body is not None

    def syntax_sources(self) -> list[str]:
        """The texts V8 must compile for this analysis: the body, then the marked body if any (only
        for a file no static rule refused)."""
        if self.body is None:
            return []
        if self.errors or self.marked_body is None:
            return [self.body]
        return [self.body, self.marked_body]

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
        line_start = source.rfind("\n", 0, exc.start) + 1
        column = len(source[line_start : exc.start].encode("utf-16-le", "surrogatepass")) // 2 + 1
        analysis.errors.append(
            WorkflowLoadError(
                "not-utf8",
                f"the inline source contains the lone surrogate U+{ord(source[exc.start]):04X} at index "
                f"{exc.start}, which has no UTF-8 form; remove it or pair it",
                path=label,
                line=source.count("\n", 0, exc.start) + 1,
                column=column,
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
    meta_range: tuple[int, int] | None = None
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
            meta_range = (statement.export_start, statement.statement_end)
            analysis.body = _body(analysis.source, data, meta_range)
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
    if analysis.body is not None and meta_range is not None:
        marks, static = find_marks(
            root, src, meta_range=meta_range, import_refused=profile.import_refused_at_load
        )
        for html in static:
            line, column = src.offset_position(html.start)
            analysis.errors.append(_html_comment_error(html.kind, path, line, column))
        if marks:
            analysis.marks = marks
            analysis.marked_body = _body(marked_text(data, marks).decode("utf-8"), data, meta_range)
            analysis.mark_positions = [src.offset_position(m.start) for m in marks]
            analysis.mark_v8_positions = _v8_positions(analysis.source, data, marks)
    for finding in scan(root, src, import_refused=profile.import_refused_at_load, profile=profile.name):
        if finding.error:
            analysis.errors.append(
                WorkflowLoadError(
                    finding.rule, finding.message, path=path, line=finding.line, column=finding.column
                )
            )
        else:
            analysis.warnings.append(
                WorkflowWarning(
                    finding.rule, finding.message, finding.line, finding.column, finding.key or None
                )
            )
    _sort(analysis)


def _body(text: str, data: bytes, meta_range: tuple[int, int]) -> str:
    """What the realm executes: ``text`` with the meta statement (Claude Code 2.1.332 extracts it:
    `typeof meta` is 'undefined' in the body) and a ``#!`` line at the very start (accepted by Claude Code
    2.1.332 and 2.1.209, measured; after a BOM or anything else it is refused) blanked out. Line breaks stay and every other character becomes as many spaces
    as it has UTF-16 code units, so every line and column V8 reports is a position in the file."""
    at = len(data[: meta_range[0]].decode("utf-8"))
    end = len(data[: meta_range[1]].decode("utf-8"))
    body = text[:at] + _blank(text[at:end]) + text[end:]
    if body.startswith("#!"):  # only at the very start: after a BOM or a comment Claude refuses it
        stop = _LINE_BREAK.search(body)
        cut = stop.start() if stop else len(body)
        body = _blank(body[:cut]) + body[cut:]
    return body


def _blank(text: str) -> str:
    return "".join(ch if ch in "\r\n\u2028\u2029" else ("  " if ord(ch) > 0xFFFF else " ") for ch in text)


def _v8_positions(text: str, data: bytes, marks: Sequence[Mark]) -> list[tuple[int, int]]:
    """``(line, column)`` of each mark as V8 counts them: CR LF, CR, LF, U+2028 and U+2029 end a line;
    columns in UTF-16 code units, both 1-based."""
    out: list[tuple[int, int]] = []
    for mark in marks:
        before = data[: mark.start].decode("utf-8")
        lines = _LINE_BREAK.split(before)
        last = lines[-1]
        out.append((len(lines), len(last.encode("utf-16-le", "surrogatepass")) // 2 + 1))
    return out


_HTML_COMMENT = {
    "html-open": "`<!--`",
    "html-close": "`-->` at the start of a line",
}


def _html_comment_error(
    kind: str, path: str | None, line: int | None, column: int | None
) -> WorkflowLoadError:
    return WorkflowLoadError(
        "html-comment",
        f"{_HTML_COMMENT[kind]} opens an HTML-like comment for V8 but is read as operators by Claude "
        "Code's loader, which refuses or runs it differently (profile claude-code/2.1.332, measured); "
        "use // or /* */ for comments and spaces between operators",
        path=path,
        line=line,
        column=column,
    )


def _hidden_code_error(mark: Mark, path: str | None, line: int, column: int) -> WorkflowLoadError:
    if mark.kind == "import-call":
        return WorkflowLoadError(
            "dynamic-import",
            "import() is refused before launch (profile claude-code/2.1.332): the workflow realm has no "
            "module loader; remove the import and use agent() or args instead",
            path=path,
            line=line,
            column=column,
        )
    if mark.kind in _HTML_COMMENT:
        return _html_comment_error(mark.kind, path, line, column)
    return WorkflowLoadError(
        "hidden-code",
        f"V8 reads this `{mark.kind}` as code, but the loader's static check read it as text inside a "
        "string, template, regular expression or comment: something before it (an HTML-like comment "
        "`<!--`, an unusual line break such as U+2028, or another construct JavaScript parsers read "
        "differently) changes how the file is read. The file is refused; rewrite that construct",
        path=path,
        line=line,
        column=column,
    )


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
    engine_message = message
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
        engine_message = "Unexpected end of input"
        line, column = len(lines), len(lines[-1].encode("utf-16-le", "surrogatepass")) // 2 + 1
    return WorkflowLoadError(
        "syntax",
        f"syntax error: {message} (V8 compiles the script as strict-mode code with top-level "
        "await and return allowed); fix the code at this position",
        path=path,
        line=line,
        column=column,
        engine_message=engine_message,
        excerpt=lines[line - 1] if line is not None and 0 < line <= len(lines) else None,
    )


def apply_syntax_problems(analysis: Analysis, problems: Sequence[SyntaxProblem | None]) -> None:
    """Stage two with V8's verdicts on ``analysis.syntax_sources()`` (the body, then the marked body).

    A syntax error in the body refuses the file. Otherwise a failure of the marked body means V8 reads
    one of the marks as code (see ``_lexical``): the first such mark names the rule. A tree-sitter gap
    V8 accepts is a ``parser-gap`` warning.
    """
    problem = problems[0] if problems else None
    marked = problems[1] if len(problems) > 1 else None
    if problem is not None:
        analysis.errors.append(syntax_error(analysis.body or "", analysis.path, problem))
    elif analysis.errors:
        pass  # refused already; a tree-sitter gap V8 accepts is no error
    elif marked is not None and analysis.marks:
        index = _mark_at(analysis.mark_v8_positions, marked.line, marked.column)
        line, column = analysis.mark_positions[index]
        analysis.errors.append(_hidden_code_error(analysis.marks[index], analysis.path, line, column))
    elif analysis.parse_error is not None:
        error = analysis.parse_error
        analysis.warnings.append(
            WorkflowWarning(
                "parser-gap",
                "the tree-sitter grammar could not parse this region although V8 compiles it; V8 confirmed "
                "that import() and await using appear nowhere in it",
                error.line,
                error.column,
            )
        )
    _sort(analysis)


def _mark_at(positions: Sequence[tuple[int, int]], line: int | None, column: int | None) -> int:
    # V8's error sits on the first mark it reads as code; without a position, blame the first mark.
    if line is None:
        return 0
    where = (line, column or 1)
    best = 0
    for i, position in enumerate(positions):
        if position == where:
            return i
        if position <= where:
            best = i
    return best


def check_analyses(analyses: Sequence[Analysis], names: Sequence[str] | None = None) -> list[str] | None:
    """Stage two for every analysis that needs it, in one realm call; returns ``names`` sorted with
    ``localeCompare`` when given (see :func:`check_and_collate_bodies`).

    Raises:
        RealmError: the Node worker could not run.
    """
    pending = pending_bodies(analyses)
    sources = [a.syntax_sources() for a in pending]
    flat = [text for group in sources for text in group]
    problems, ordered = check_and_collate_bodies(flat, names)
    at = 0
    for analysis, group in zip(pending, sources, strict=True):
        apply_syntax_problems(analysis, problems[at : at + len(group)])
        at += len(group)
    return ordered


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
        check_analyses(pending)
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
