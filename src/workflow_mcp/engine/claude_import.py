"""Importing Claude Code's own workflow runs, read-only, so they can be resumed here.

Claude Code (2.1.332 and 2.1.209 alike) keeps one workflow run in the session directory
``<config>/projects/<project slug>/<session id>/``::

    workflows/<runId>.json                              the run record: runId, workflowName, script,
                                                        scriptPath, args (when given), status, result,
                                                        workflowProgress (one entry per agent)
    workflows/scripts/<workflowName>-<runId>.js         the saved script
    subagents/workflows/<runId>/journal.jsonl           the journal, one JSON object a line
    subagents/workflows/<runId>/agent-<agentId>.meta.json  per agent: worktreePath, spawnedWithWorktree
    subagents/workflows/<runId>/agent-<agentId>.jsonl      per agent: the transcript (token usage)

Journal lines (PROFILE-FACTS "Journal and cache keys", checked against the oracle fixtures in
``tests/fixtures/claude``):

- claude-code/2.1.332: ``{"type":"launched"}`` first, then ``started {key, agentId, label, phase?}``,
  ``result {key, agentId, result, sessionId, …}`` and ``failed {key, agentId}`` (``agentId`` is ``""``
  for a call refused before it launched).
- claude-code/2.1.209: ``started {key, agentId}`` and ``result {key, agentId, result}`` only.

A run resumed in Claude keeps its id, appends to the same journal (replayed calls are not journaled
again) and rewrites the record and the saved script with the newer script.

What an import yields: every ``result`` line becomes a read-only :class:`JournalRecord` keyed by
Claude's v2 key. Its ``content_key`` is empty: the prompt can be read from the agent transcript, but
the canonical options of the call are recorded nowhere, so a content key cannot be computed; a
:class:`Replay` matches such records by v2 key under either policy (``content`` then ignores call
order but still needs an identical chain position). ``null`` results and ``failed`` lines are never
reused. A call made with ``isolation: 'worktree'`` (run record entry ``isolation``, or agent metadata
``spawnedWithWorktree``/``worktreePath``) is marked ``side_effects`` and is reused only with
``allow_side_effects=True``. Token usage comes from the agent transcripts when present (``{}``
otherwise, so a replayed call then charges nothing to ``budget.spent()``).

Claude's files are only ever opened for reading.

Exceptions (all :class:`~workflow_mcp.errors.WorkflowMcpError`)::

    ClaudeImportError                 root of the errors below
    ├── ClaudeRunNotFoundError        no run record at the path (or none with the requested run id)
    ├── AmbiguousClaudeRunError       several runs at the path and none chosen (lists them)
    ├── ClaudeRunFormatError          a run record that is not JSON, or lacks its run id or script
    ├── ClaudeRunMismatchError        the journal or saved script belongs to another run or script
    ├── LiveCopyMismatchError         the live workflow file differs from the saved script (both hashes)
    └── ForeignWorkflowError          the live file is another workflow (its meta name differs)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..definitions.load import Workflow, load_workflow
from ..errors import WorkflowMcpError
from .journal import JournalRecord, Replay, ResumePolicy, json_value_problem
from .run import MISSING

__all__ = [
    "AmbiguousClaudeRunError",
    "ClaudeImportError",
    "ClaudeResume",
    "ClaudeRun",
    "ClaudeRunFormatError",
    "ClaudeRunMismatchError",
    "ClaudeRunNotFoundError",
    "ForeignWorkflowError",
    "LiveCopyMismatchError",
    "WorkflowLoader",
    "find_claude_runs",
    "import_claude_run",
    "read_claude_run",
    "verify_live_copy",
]

PROFILE_332 = "claude-code/2.1.332"
PROFILE_209 = "claude-code/2.1.209"

StrPath = str | os.PathLike[str]


# -- errors ------------------------------------------------------------------------------------
class ClaudeImportError(WorkflowMcpError):
    """Root of the errors raised while importing a Claude Code run."""


class ClaudeRunNotFoundError(ClaudeImportError):
    """Raised when a path holds no Claude Code run record (or none with the requested run id)."""

    def __init__(self, path: StrPath, run_id: str | None = None, available: tuple[str, ...] = ()) -> None:
        self.path = os.fspath(path)
        self.run_id = run_id
        self.available = available
        if run_id is None:
            message = (
                f"{self.path}: no Claude Code workflow run here; pass a run record "
                "(<session>/workflows/wf_….json) or the session directory that holds it"
            )
        else:
            message = f"{self.path}: no Claude Code workflow run {run_id!r}"
            if available:
                message += "; runs here: " + ", ".join(available)
        super().__init__(message)


class AmbiguousClaudeRunError(ClaudeImportError):
    """Raised when a directory holds several Claude Code runs and no run id picks one."""

    def __init__(self, path: StrPath, run_ids: tuple[str, ...]) -> None:
        self.path = os.fspath(path)
        self.run_ids = run_ids
        super().__init__(
            f"{self.path} holds {len(run_ids)} Claude Code workflow runs: {', '.join(run_ids)}; "
            "name one (its run record file, or its run id)"
        )


class ClaudeRunFormatError(ClaudeImportError):
    """Raised when a run record is not a JSON object or lacks its run id or saved script."""

    def __init__(self, path: StrPath, problem: str) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: not a usable Claude Code run record: {problem}")


class ClaudeRunMismatchError(ClaudeImportError):
    """Raised when a journal or saved script does not belong to the run record beside it."""

    def __init__(self, run_id: str, path: StrPath, problem: str) -> None:
        self.run_id = run_id
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path} does not belong to Claude Code run {run_id}: {problem}")


class LiveCopyMismatchError(ClaudeImportError):
    """Raised when the live workflow file is not byte-identical to the script the Claude run saved."""

    def __init__(self, run_id: str, path: StrPath, saved_hash: str, live_hash: str) -> None:
        self.run_id = run_id
        self.path = os.fspath(path)
        self.saved_hash = saved_hash
        self.live_hash = live_hash
        super().__init__(
            f"{self.path} (sha256 {live_hash}) is not the script Claude Code run {run_id} saved "
            f"(sha256 {saved_hash}); resume without the live file to run the saved script, or allow "
            "edits to replay the unchanged prefix"
        )


class ForeignWorkflowError(ClaudeImportError):
    """Raised when the live file given for a resume is another workflow than the Claude run's."""

    def __init__(self, run_id: str, path: StrPath, expected: str, found: str) -> None:
        self.run_id = run_id
        self.path = os.fspath(path)
        self.expected = expected
        self.found = found
        super().__init__(
            f"{self.path} is workflow {found!r}, but Claude Code run {run_id} ran {expected!r}; "
            "pass that workflow's file, or none to run the saved script"
        )


# -- values ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClaudeRun:
    """One Claude Code workflow run as read from its files.

    ``source`` is the saved script, ``source_hash`` the SHA-256 hex of its bytes. ``args`` is the
    recorded args value, or :data:`~workflow_mcp.engine.run.MISSING` when the record holds none.
    ``profile`` is guessed from the journal's line shapes (``launched`` lines, labels on ``started``
    lines, ``sessionId`` on ``result`` lines mean 2.1.332; bare lines mean 2.1.209; an empty journal
    defaults to 2.1.332). ``records`` holds one read-only record per ``result`` line, in journal order.
    Counts: ``skipped_lines`` (not JSON, truncated, nested too deeply, not an object, a ``result``
    without a result or with one that cannot be replayed), ``keyless_lines`` (tolerated lines without
    a ``key``, ``launched`` not counted), ``failed_calls`` (``failed`` lines), ``unfinished_calls``
    (started, neither result nor failed). ``diagnostics`` says why each skipped line was skipped
    (``journal.jsonl line 7: …``; the first 20, then a count); a resumed run shows them as warnings.
    """

    run_id: str
    workflow_name: str
    source: str
    source_hash: str
    args: Any
    profile: str
    records: tuple[JournalRecord, ...]
    skipped_lines: int = 0
    keyless_lines: int = 0
    failed_calls: int = 0
    unfinished_calls: int = 0
    diagnostics: tuple[str, ...] = ()
    status: str | None = None
    result: Any = None
    record_path: str = ""
    journal_path: str | None = None
    script_path: str | None = None

    @property
    def has_args(self) -> bool:
        return self.args is not MISSING


class WorkflowLoader(Protocol):
    """What :func:`import_claude_run` needs of a service: loading a workflow by path or name
    (``WorkflowService.load`` fits)."""

    def load(self, target: str, *, profile: str | None = None) -> Workflow: ...


@dataclass(frozen=True)
class ClaudeResume:
    """Everything needed to resume an imported Claude run: run ``workflow`` with ``args``, profile
    ``run.profile`` and ``replay``; ``resumed_from`` names the origin (``claude:<runId>``)."""

    run: ClaudeRun
    workflow: Workflow
    replay: Replay
    args: Any

    @property
    def resumed_from(self) -> str:
        return "claude:" + self.run.run_id

    @property
    def profile(self) -> str:
        return self.run.profile


# -- reading -----------------------------------------------------------------------------------
def find_claude_runs(path: StrPath) -> list[Path]:
    """The run record files (``wf_*.json``) at ``path``: a record itself, a run's journal or its
    journal directory, a session directory or its ``<session>.jsonl`` transcript, a ``workflows``
    directory, or a project directory (every session in it). Sorted by file name."""
    p = Path(path)
    if p.is_file():
        if p.name.startswith("wf_") and p.suffix == ".json":
            return [p]
        if p.name == "journal.jsonl":
            return _records_for_run_dir(p.parent)
        if p.suffix == ".jsonl" and p.with_suffix("").is_dir():
            return find_claude_runs(p.with_suffix(""))
        return []
    if not p.is_dir():
        return []
    if p.name.startswith("wf_") and (p / "journal.jsonl").is_file():
        return _records_for_run_dir(p)
    found: set[Path] = set()
    for pattern in ("wf_*.json", "workflows/wf_*.json", "*/workflows/wf_*.json"):
        found.update(x for x in p.glob(pattern) if x.is_file())
    return sorted(found, key=lambda x: (x.name, str(x)))


def _records_for_run_dir(run_dir: Path) -> list[Path]:
    # <session>/subagents/workflows/<runId>/ -> <session>/workflows/<runId>.json
    record = run_dir.parent.parent.parent / "workflows" / (run_dir.name + ".json")
    return [record] if record.is_file() else []


def read_claude_run(path: StrPath, *, run_id: str | None = None) -> ClaudeRun:
    """Read one Claude Code workflow run (see :func:`find_claude_runs` for what ``path`` may be).

    ``run_id`` picks a run when the path holds several. Files are opened read-only.

    Raises:
        ClaudeRunNotFoundError: no run record at ``path`` (or none called ``run_id``).
        AmbiguousClaudeRunError: several runs and no ``run_id``.
        ClaudeRunFormatError: the record is not a JSON object or lacks ``runId`` or the script.
        ClaudeRunMismatchError: the saved script or the journal belongs to another run or script.
    """
    candidates = find_claude_runs(path)
    ids = tuple(c.name[: -len(".json")] for c in candidates)
    if run_id is not None:
        chosen = [c for c, i in zip(candidates, ids, strict=True) if i == run_id]
        if not chosen:
            raise ClaudeRunNotFoundError(path, run_id, ids)
        candidates = chosen
    if not candidates:
        raise ClaudeRunNotFoundError(path)
    if len(candidates) > 1:
        raise AmbiguousClaudeRunError(path, ids)
    return _read_record(candidates[0])


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:  # read-only: Claude's files are never written
        return f.read()


def _strict_json(text: str, *, constants: bool = False) -> Any:
    """``json.loads`` that refuses ``NaN``/``Infinity`` (not JSON, and the realm's ``JSON.parse``
    refuses them) unless ``constants`` (the caller checks the value), and turns a nesting too deep
    for Python's parser into a ``ValueError``."""
    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("it is nested too deeply to read") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"it holds {name}, which JSON does not allow")


def _read_record(record_path: Path) -> ClaudeRun:
    try:
        record = _strict_json(_read_bytes(record_path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ClaudeRunFormatError(record_path, f"cannot read it as JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise ClaudeRunFormatError(record_path, "the file holds no JSON object")
    if "args" in record:
        problem = json_value_problem(record["args"])
        if problem is not None:
            raise ClaudeRunFormatError(record_path, f"its args cannot be replayed: {problem}")
    run_id = record.get("runId")
    if not isinstance(run_id, str) or not run_id:
        raise ClaudeRunFormatError(record_path, "no runId")
    if run_id != record_path.name[: -len(".json")]:
        raise ClaudeRunMismatchError(run_id, record_path, "the file name names another run id")
    name = record.get("workflowName")
    workflow_name = name if isinstance(name, str) else ""
    session = record_path.parent.parent
    source_bytes, script_path = _saved_script(record, record_path, session, run_id)
    try:
        source = source_bytes.decode("utf-8", errors="strict") if source_bytes is not None else None
    except UnicodeDecodeError as exc:
        raise ClaudeRunFormatError(
            script_path or record_path, f"its saved script is not UTF-8 (byte {exc.start})"
        ) from None
    if source is None:
        raise ClaudeRunFormatError(record_path, "no saved script (neither `script` nor the scripts file)")

    progress = _agents_in_record(record)
    run_dir = session / "subagents" / "workflows" / run_id
    journal_path = run_dir / "journal.jsonl"
    parsed = _parse_journal(journal_path) if journal_path.is_file() else _Journal()
    known = {a for a in progress if a}
    seen = {a for a in parsed.agent_ids if a}
    if known and seen and not known & seen:
        raise ClaudeRunMismatchError(
            run_id,
            journal_path,
            f"none of the {len(seen)} agents in the journal appear in the run record "
            "(a journal of another run or another script)",
        )
    records = tuple(
        JournalRecord(
            key=line.key,
            content_key="",
            agent_id=line.agent_id,
            result=line.result,
            tokens=_tokens(run_dir, line.agent_id),
            label=line.label or str(progress.get(line.agent_id, {}).get("label") or ""),
            side_effects=_side_effects(run_dir, line.agent_id, progress.get(line.agent_id, {})),
            source_run_id=run_id,
            read_only=True,
            completed=rank,  # result lines are appended as Claude's calls complete
        )
        for rank, line in enumerate(parsed.results)
    )
    return ClaudeRun(
        run_id=run_id,
        workflow_name=workflow_name,
        source=source,
        source_hash=hashlib.sha256(source_bytes or b"").hexdigest(),
        args=record.get("args", MISSING),
        profile=parsed.profile(),
        records=records,
        skipped_lines=parsed.skipped,
        diagnostics=tuple(parsed.diagnostics),
        keyless_lines=parsed.keyless,
        failed_calls=parsed.failed,
        unfinished_calls=len(parsed.started - parsed.finished),
        status=record.get("status") if isinstance(record.get("status"), str) else None,
        result=record.get("result"),
        record_path=str(record_path),
        journal_path=str(journal_path) if journal_path.is_file() else None,
        script_path=str(script_path) if script_path is not None else None,
    )


def _saved_script(
    record: dict[str, Any], record_path: Path, session: Path, run_id: str
) -> tuple[bytes | None, Path | None]:
    """The saved script's bytes and file: the scripts file next to the record when present (its
    bytes are the identity), else the record's ``script`` text. Both present must agree."""
    scripts = session / "workflows" / "scripts"
    candidates: list[Path] = []
    script_path_field = record.get("scriptPath")
    if isinstance(script_path_field, str) and script_path_field:
        candidates.append(scripts / os.path.basename(script_path_field))
    candidates.extend(sorted(scripts.glob(f"*-{run_id}.js")))
    if isinstance(script_path_field, str) and os.path.isabs(script_path_field):
        candidates.append(Path(script_path_field))
    embedded = record.get("script")
    if isinstance(embedded, str):
        problem = json_value_problem(embedded)
        if problem is not None:
            raise ClaudeRunFormatError(record_path, f"its script cannot be run: {problem}")
    for candidate in candidates:
        if candidate.is_file():
            data = _read_bytes(candidate)
            if isinstance(embedded, str) and embedded.encode("utf-8") != data:
                raise ClaudeRunMismatchError(
                    run_id,
                    candidate,
                    f"the saved script (sha256 {hashlib.sha256(data).hexdigest()}) differs from the "
                    f"record's script (sha256 {hashlib.sha256(embedded.encode('utf-8')).hexdigest()})",
                )
            return data, candidate
    if isinstance(embedded, str):
        return embedded.encode("utf-8"), None
    return None, None


def _agents_in_record(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    progress = record.get("workflowProgress")
    if isinstance(progress, list):
        for entry in progress:
            if isinstance(entry, dict) and entry.get("type") == "workflow_agent":
                agent_id = entry.get("agentId")
                if isinstance(agent_id, str) and agent_id:
                    out[agent_id] = entry
    return out


@dataclass(frozen=True)
class _Result:
    key: str
    agent_id: str
    result: Any
    label: str


_MAX_DIAGNOSTICS = 20


class _Journal:
    def __init__(self) -> None:
        self.diagnostics: list[str] = []
        self.results: list[_Result] = []
        self.agent_ids: set[str] = set()
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.labels: dict[str, str] = {}
        self.skipped = 0
        self.keyless = 0
        self.failed = 0
        self.launched = False
        self.labelled = False
        self.session_ids = False
        self.lines = 0

    def skip(self, where: str, why: str) -> None:
        self.skipped += 1
        if len(self.diagnostics) < _MAX_DIAGNOSTICS:
            self.diagnostics.append(f"{where}: {why}")
        elif len(self.diagnostics) == _MAX_DIAGNOSTICS:
            self.diagnostics.append("more journal lines were skipped (see the skipped-line count)")

    def profile(self) -> str:
        if self.launched or self.labelled or self.session_ids:
            return PROFILE_332
        return PROFILE_209 if self.lines else PROFILE_332


def _parse_journal(path: Path) -> _Journal:
    """Every line is read on its own: one that cannot be used is skipped with a diagnostic (a result
    line's call then runs live), never a reason to refuse the whole run."""
    j = _Journal()
    for number, raw in enumerate(_read_bytes(path).split(b"\n"), 1):
        if not raw.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            # NaN/Infinity parse here so the line can be told apart; its result is checked below.
            entry = _strict_json(raw.decode("utf-8"), constants=True)
        except UnicodeDecodeError:
            j.skip(where, "it is not UTF-8; skipped (a result line's call runs live)")
            continue
        except ValueError as exc:
            # e.g. the last line cut off mid-JSON by a crash
            j.skip(where, f"it is not usable JSON ({exc}); skipped (a result line's call runs live)")
            continue
        if not isinstance(entry, dict):
            j.skip(where, "it is not a JSON object; skipped")
            continue
        kind = entry.get("type")
        if kind == "launched":
            j.launched = True
            continue
        key = entry.get("key")
        if not isinstance(key, str) or not key:
            j.keyless += 1  # older lines carry no key: nothing to match them by
            continue
        agent = entry.get("agentId")
        agent_id = agent if isinstance(agent, str) else ""
        if kind == "started":
            j.lines += 1
            j.agent_ids.add(agent_id)
            j.started.add(agent_id or key)
            label = entry.get("label")
            if "label" in entry or "phase" in entry:
                j.labelled = True
            if isinstance(label, str):
                j.labels[agent_id] = label
        elif kind == "result":
            if "result" not in entry:
                j.skip(where, "a result line without a result; skipped")
                continue
            problem = json_value_problem(entry["result"])
            if problem is not None:
                j.skip(where, f"its result cannot be replayed: {problem}; skipped, the call runs live")
                continue
            j.lines += 1
            j.agent_ids.add(agent_id)
            j.finished.add(agent_id or key)
            if "sessionId" in entry:
                j.session_ids = True
            j.results.append(_Result(key, agent_id, entry["result"], j.labels.get(agent_id, "")))
        elif kind == "failed":
            j.lines += 1
            j.failed += 1
            j.finished.add(agent_id or key)
            if agent_id:
                j.agent_ids.add(agent_id)
        # any other line type with a key: tolerated, nothing to reuse
    return j


def _json_file(path: Path) -> Any:
    try:
        return _strict_json(_read_bytes(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _side_effects(run_dir: Path, agent_id: str, progress: dict[str, Any]) -> bool:
    if progress.get("isolation") == "worktree":
        return True
    if not agent_id:
        return False
    meta = _json_file(run_dir / f"agent-{agent_id}.meta.json")
    return isinstance(meta, dict) and bool(meta.get("spawnedWithWorktree") or meta.get("worktreePath"))


def _tokens(run_dir: Path, agent_id: str) -> dict[str, int]:
    """Token usage summed over the agent transcript's assistant messages (each message id once)."""
    path = run_dir / f"agent-{agent_id}.jsonl"
    if not agent_id or not path.is_file():
        return {}
    usage_by_message: dict[str, dict[str, Any]] = {}
    try:
        data = _read_bytes(path)
    except OSError:
        return {}
    for n, raw in enumerate(data.split(b"\n")):
        try:
            entry = _strict_json(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, ValueError):
            continue
        if not isinstance(entry, dict) or entry.get("type") != "assistant":
            continue
        message = entry.get("message")
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            usage_by_message[str(message.get("id") or n)] = message["usage"]
    totals = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    fields = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cacheRead": "cache_read_input_tokens",
        "cacheWrite": "cache_creation_input_tokens",
    }
    for usage in usage_by_message.values():
        for ours, theirs in fields.items():
            value = usage.get(theirs)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[ours] += value
    return totals if usage_by_message else {}


# -- resuming ----------------------------------------------------------------------------------
def verify_live_copy(run: ClaudeRun, path: StrPath) -> None:
    """Check that the live workflow file at ``path`` is byte-identical to the script ``run`` saved.

    Raises:
        LiveCopyMismatchError: the SHA-256 of the file's bytes differs (both hashes named).
        ClaudeRunNotFoundError: no readable file at ``path``.
    """
    try:
        live = hashlib.sha256(_read_bytes(Path(path))).hexdigest()
    except OSError as exc:
        raise ClaudeRunNotFoundError(path) from exc
    if live != run.source_hash:
        raise LiveCopyMismatchError(run.run_id, path, run.source_hash, live)


def import_claude_run(
    loader: WorkflowLoader,
    path: StrPath,
    live_path: StrPath | None = None,
    *,
    run_id: str | None = None,
    policy: ResumePolicy = "prefix",
    allow_side_effects: bool = False,
    allow_edits: bool = False,
) -> ClaudeResume:
    """Prepare to resume the Claude Code run at ``path`` (see :func:`read_claude_run`).

    Without ``live_path`` the saved script runs. With it, the live file is loaded through
    ``loader`` (a path, or a name its discovery resolves) under the run's profile; it must be the
    same workflow (same ``meta.name``) and, unless ``allow_edits``, byte-identical to the saved
    script. With edits, the ``prefix`` policy replays the calls before the first change and runs the
    rest live (Claude's own resume rule). ``policy`` ``content`` replays every call whose v2 key
    recurs. Worktree calls replay only with ``allow_side_effects``.

    Run the result with ``RunOptions(profile=resume.profile)``: the chain keys depend on the profile.

    Raises:
        the errors of :func:`read_claude_run`; ``ForeignWorkflowError`` for another workflow;
        ``LiveCopyMismatchError`` for an edited live file without ``allow_edits``; the loader's
        ``WorkflowNotFoundError``/``WorkflowLoadError``.
    """
    run = read_claude_run(path, run_id=run_id)
    if live_path is None:
        workflow = load_workflow(
            run.script_path or f"{run.workflow_name or run.run_id}.js", source=run.source, profile=run.profile
        )
    else:
        workflow = loader.load(os.fspath(live_path), profile=run.profile)
        if run.workflow_name and workflow.meta.name != run.workflow_name:
            raise ForeignWorkflowError(run.run_id, live_path, run.workflow_name, workflow.meta.name)
        if not allow_edits and workflow.source_hash != run.source_hash:
            raise LiveCopyMismatchError(run.run_id, live_path, run.source_hash, workflow.source_hash)
    replay = Replay(run.records, policy, allow_side_effects=allow_side_effects, notes=run.diagnostics)
    return ClaudeResume(run=run, workflow=workflow, replay=replay, args=run.args)
