"""Claude Code's own runs import read-only and resume here, through ``WorkflowService``.

Inputs are the golden fixtures in ``tests/fixtures/claude`` (real Claude Code runs recorded with the
shared oracle). A resumed run gets the imported replay the way ``workflow-mcp resume <Claude run>``
does: ``import_claude_run(service, path, …)`` prepares it and the service starts it with
``resume_from=resume.resumed_from``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replayed import calls
from workflow_mcp.engine.claude_import import (
    AmbiguousClaudeRunError,
    ClaudeResume,
    ClaudeRunMismatchError,
    ClaudeRunNotFoundError,
    ForeignWorkflowError,
    LiveCopyMismatchError,
    find_claude_runs,
    import_claude_run,
    read_claude_run,
    verify_live_copy,
)
from workflow_mcp.engine.journal import Replay, ResumePolicy
from workflow_mcp.engine.run import MISSING, RunOptions
from workflow_mcp.errors import WorkflowMcpError
from workflow_mcp.events import Event
from workflow_mcp.providers import FakeProvider
from workflow_mcp.service import WorkflowService
from workflow_mcp.store import MemoryStore, SqliteStore

from claude_cases import ClaudeCase, case_names, git_repo
from helpers import arun


class ClaudeAwareService(WorkflowService):
    """``WorkflowService`` plus the hook the CLI's ``resume <Claude run>`` wiring adds: a
    ``resume_from`` that names an imported Claude run (``claude:<runId>``) replays its journal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.imported: dict[str, Replay] = {}

    def replay_for(self, run_id: str, policy: ResumePolicy) -> Replay:
        if run_id in self.imported:
            return self.imported[run_id]
        return super().replay_for(run_id, policy)


class Resumed:
    def __init__(self, result: Any, events: list[Event], provider: FakeProvider) -> None:
        self.result = result
        self.events = events
        self.provider = provider

    def labels(self, event_type: str) -> list[str]:
        return [str(e.payload.get("label")) for e in self.events if e.type == event_type]

    @property
    def usage(self) -> dict[str, Any]:
        (done,) = [e for e in self.events if e.type == "run.completed"]
        usage: dict[str, Any] = done.payload["tokenUsage"]
        return usage


def _service(case: ClaudeCase, root: Path, *, sqlite: bool = False) -> ClaudeAwareService:
    store = SqliteStore(str(root / "state.db")) if sqlite else MemoryStore()
    return ClaudeAwareService(store, cwd=str(git_repo(case.project(root))), home=str(root / "home"))


def _resume(case: ClaudeCase, service: ClaudeAwareService, resume: ClaudeResume) -> Resumed:
    provider = FakeProvider(case.fake)
    service.imported[resume.resumed_from] = resume.replay
    options = RunOptions(profile=resume.profile, cwd=service.cwd, home=service.home)

    async def go() -> Resumed:
        handle = service.start_run(
            resume.workflow,
            provider=provider,
            args=resume.args,
            options=options,
            resume_from=resume.resumed_from,
            policy=resume.replay.policy,
        )
        result = await handle.result()
        return Resumed(result, service.events(handle.run_id), provider)

    return arun(go())


# -- reading -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", case_names())
def test_every_fixture_run_imports_with_its_script_args_profile_and_journal(name: str) -> None:
    case = ClaudeCase(name)
    run = read_claude_run(case.session)
    journal = case.journal()
    results = [line for line in journal if line.get("type") == "result"]

    assert run.run_id == case.run_id
    assert run.source.encode("utf-8") == case.script.read_bytes()
    assert run.source_hash == case.script_sha256()
    assert run.workflow_name == json.loads(case.record_path.read_text(encoding="utf-8"))["workflowName"]
    assert run.args == case.args and run.has_args == (case.args is not MISSING)
    assert run.profile == case.profile
    assert [(r.key, r.agent_id, r.result) for r in run.records] == [
        (line["key"], line["agentId"], line["result"]) for line in results
    ]
    assert all(r.read_only and r.content_key == "" and r.source_run_id == run.run_id for r in run.records)
    assert run.failed_calls == sum(1 for line in journal if line.get("type") == "failed")
    assert (run.skipped_lines, run.keyless_lines, run.unfinished_calls) == (0, 0, 0)
    assert run.status == "completed"


def test_a_run_is_found_from_its_record_session_journal_or_project_directory(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    run_dir = case.journal_path.parent
    for path in (case.record_path, case.session, case.session / "workflows", case.journal_path, run_dir):
        assert read_claude_run(path).run_id == case.run_id
    project = tmp_path / "-home-me-proj"
    shutil.copytree(ClaudeCase("plain").session, project / "session-a")
    shutil.copytree(ClaudeCase("parallel").session, project / "session-b")
    with pytest.raises(AmbiguousClaudeRunError) as err:
        read_claude_run(project)
    assert set(err.value.run_ids) == {case.run_id, ClaudeCase("parallel").run_id}
    assert case.run_id in str(err.value)
    assert read_claude_run(project, run_id=case.run_id).workflow_name == "plain-three"
    with pytest.raises(ClaudeRunNotFoundError, match="wf_nope"):
        read_claude_run(project, run_id="wf_nope")
    with pytest.raises(ClaudeRunNotFoundError):
        read_claude_run(tmp_path / "empty")
    assert find_claude_runs(tmp_path / "nothing-here") == []


def test_a_truncated_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    session = case.copy_session(tmp_path)
    journal = session / "subagents" / "workflows" / case.run_id / "journal.jsonl"
    data = journal.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    journal.write_bytes(data[: last_start + (len(data) - last_start) // 2])  # cut mid-JSON, no newline

    run = read_claude_run(session)
    assert run.skipped_lines == 1
    assert len(run.records) == 2  # the cut line was the last call's result
    assert run.unfinished_calls == 1

    service = _service(case, tmp_path)
    resumed = _resume(case, service, import_claude_run(service, session))
    assert resumed.labels("agent.cached") == ["facts", "summary"]
    assert [r.label for r in resumed.provider.calls] == ["review"]
    assert resumed.result == case.claude_result


def test_lines_without_a_key_and_lines_that_are_not_objects_are_tolerated(tmp_path: Path) -> None:
    case = ClaudeCase("parallel")
    session = case.copy_session(tmp_path)
    journal = session / "subagents" / "workflows" / case.run_id / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    older = [
        '{"type":"started","agentId":"a0"}',
        '{"type":"result","agentId":"a0","result":"from a journal without keys"}',
        '{"type":"note","text":"no key"}',
        "",
        "[1, 2]",
        '"just a string"',
    ]
    journal.write_text("\n".join(lines[:3] + older + lines[3:]) + "\n", encoding="utf-8")

    run = read_claude_run(session)
    assert (run.keyless_lines, run.skipped_lines) == (3, 2)
    assert len(run.records) == 4
    service = _service(case, tmp_path)
    resumed = _resume(case, service, import_claude_run(service, session))
    assert sorted(resumed.labels("agent.cached")) == ["after", "first", "p0", "p1"]
    assert resumed.provider.calls == []


def test_a_journal_of_another_run_is_refused(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    session = case.copy_session(tmp_path)
    shutil.copyfile(
        ClaudeCase("parallel").journal_path,
        session / "subagents" / "workflows" / case.run_id / "journal.jsonl",
    )
    with pytest.raises(ClaudeRunMismatchError, match="none of the 4 agents in the journal appear"):
        read_claude_run(session)


def test_a_saved_script_that_differs_from_the_record_is_refused(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    session = case.copy_session(tmp_path)
    (script,) = (session / "workflows" / "scripts").glob("*.js")
    script.write_bytes(script.read_bytes() + b"// edited\n")
    with pytest.raises(ClaudeRunMismatchError, match="differs from the record's script"):
        read_claude_run(session)


# -- live copies -------------------------------------------------------------------------------
def test_a_live_copy_must_match_the_saved_script_byte_for_byte(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    run = read_claude_run(case.session)
    verify_live_copy(run, case.script)
    edited = tmp_path / "plain.js"
    edited.write_bytes(case.script.read_bytes().replace(b"Summarize", b"Summarise"))
    live_hash = hashlib.sha256(edited.read_bytes()).hexdigest()
    with pytest.raises(LiveCopyMismatchError) as err:
        verify_live_copy(run, edited)
    assert isinstance(err.value, WorkflowMcpError)
    assert run.source_hash in str(err.value) and live_hash in str(err.value)
    with pytest.raises(LiveCopyMismatchError):
        import_claude_run(_service(case, tmp_path), case.session, edited)


def test_a_foreign_script_is_refused(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    with pytest.raises(ForeignWorkflowError, match="parallel-fork-join"):
        import_claude_run(
            _service(case, tmp_path), case.session, ClaudeCase("parallel").script, allow_edits=True
        )


# -- resuming ----------------------------------------------------------------------------------
FULL_REPLAY = [
    "plain",
    "parallel",
    "pipeline",
    "edge-options",
    "nested",
    "fanout-edges",
    "parallel-2.1.209",
    "pipeline-2.1.209",
    "fanout-edges-2.1.209",
    "resumed-in-claude",
    "pipeline-barrier-free",
]


@pytest.mark.parametrize("name", FULL_REPLAY)
def test_resuming_with_the_same_script_replays_every_call_and_returns_claudes_result(
    name: str, tmp_path: Path
) -> None:
    case = ClaudeCase(name)
    service = _service(case, tmp_path, sqlite=name == "plain")
    resumed = _resume(case, service, import_claude_run(service, case.session, policy="prefix"))

    assert resumed.provider.calls == []
    assert resumed.labels("agent.started") == []
    assert sorted(resumed.labels("agent.cached")) == sorted(calls(resumed.events))
    assert resumed.result == case.claude_result


def test_interleaved_fan_outs_replay_every_call_where_claudes_own_resume_missed(tmp_path: Path) -> None:
    """Two unawaited parallel() calls join in completion order. Live, B joined before A. Claude's own
    resume of the same run (fixture fan-out-joins-resumed) served only the first five calls from
    cache: its replayed calls complete at once, so A joined first and every later key differed. Here
    replayed results are released in the order Claude completed them, so B joins first again and
    every call replays."""
    case = ClaudeCase("fan-out-joins")
    service = _service(case, tmp_path)
    resumed = _resume(case, service, import_claude_run(service, case.session))

    (claude_run,) = ClaudeCase("fan-out-joins-resumed").oracle["run2"]["wf"].values()
    agents = claude_run["agents"]  # [label, prompt preview, state, served from cache]
    served_by_claude = [label for label, _, _, cached in agents if cached]
    assert set(served_by_claude) < set(resumed.labels("agent.cached"))
    assert resumed.provider.calls == []
    assert resumed.labels("agent.started") == []
    # Every agent answer lands where Claude's did (the refusal texts of the two invalid tool lists
    # are worded differently here: a pending fidelity item, not replay).
    answers = [x for x in resumed.result if not x.startswith("threw: ")]
    assert answers == [x for x in case.claude_result if not x.startswith("threw: ")]


def test_the_live_file_may_be_named_when_it_is_the_saved_script(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    service = _service(case, tmp_path)
    resume = import_claude_run(service, case.session, case.script)
    assert resume.workflow.path == str(case.script)
    resumed = _resume(case, service, resume)
    assert resumed.provider.calls == [] and resumed.result == case.claude_result


def test_a_script_changed_in_the_middle_replays_the_prefix_and_runs_the_rest_live(tmp_path: Path) -> None:
    case = ClaudeCase("plain")
    edited = tmp_path / "plain-three.js"
    edited.write_bytes(case.script.read_bytes().replace(b"'Summarize: '", b"'Summarise: '"))
    service = _service(case, tmp_path)
    resumed = _resume(case, service, import_claude_run(service, case.session, edited, allow_edits=True))

    assert resumed.labels("agent.cached") == ["facts"]
    assert [r.label for r in resumed.provider.calls] == ["summary", "review"]
    assert resumed.result["facts"] == case.claude_result["facts"]


@pytest.mark.parametrize(
    ("policy", "cached", "live"),
    [("prefix", ["first"], ["p0", "p1", "after"]), ("content", ["first", "p1"], ["p0", "after"])],
)
def test_a_changed_fan_out_slot_replays_its_siblings_only_under_the_content_policy(
    tmp_path: Path, policy: ResumePolicy, cached: list[str], live: list[str]
) -> None:
    case = ClaudeCase("parallel")
    edited = tmp_path / "parallel-fork-join.js"
    edited.write_bytes(
        case.script.read_bytes().replace(b"agent('p0')", b"agent('p0 again', { label: 'p0' })")
    )
    service = _service(case, tmp_path)
    resumed = _resume(
        case, service, import_claude_run(service, case.session, edited, policy=policy, allow_edits=True)
    )

    assert sorted(resumed.labels("agent.cached")) == sorted(cached)
    assert sorted(r.label for r in resumed.provider.calls) == sorted(live)


def test_failed_calls_run_again_and_the_prefix_ends_at_the_first_of_them(tmp_path: Path) -> None:
    case = ClaudeCase("failures")
    service = _service(case, tmp_path)
    resumed = _resume(case, service, import_claude_run(service, case.session))
    # slot 0 replays; slot 2 failed in Claude (null), so it and every later call run live
    assert resumed.labels("agent.cached") == ["s0"]
    assert "s2 fails" in [r.label for r in resumed.provider.calls]
    assert resumed.result == case.claude_result


def test_worktree_calls_replay_only_when_side_effects_are_allowed(tmp_path: Path) -> None:
    case = ClaudeCase("worktree")
    run = read_claude_run(case.session)
    assert [r.label for r in run.records if r.side_effects] == ["edit"]
    assert all(r.tokens["output"] == 7 for r in run.records)

    service = _service(case, tmp_path)
    guarded = _resume(case, service, import_claude_run(service, case.session))
    assert guarded.labels("agent.cached") == ["plan"]
    assert [r.label for r in guarded.provider.calls] == ["edit", "review"]

    allowed = _resume(case, service, import_claude_run(service, case.session, allow_side_effects=True))
    assert allowed.provider.calls == []
    assert allowed.result == case.claude_result
    # replayed calls charge what the Claude run spent (output tokens), kept apart as replayed
    assert (allowed.usage["spent"], allowed.usage["replayed"]) == (21, 21)


def test_import_and_resume_never_touch_claudes_files(tmp_path: Path) -> None:
    case = ClaudeCase("worktree")
    session = case.copy_session(tmp_path / "claude")

    def snapshot() -> dict[str, tuple[bytes, int]]:
        return {
            str(p.relative_to(session)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(session.rglob("*"))
            if p.is_file()
        }

    before = snapshot()
    dirs_before = sorted(str(p) for p in session.rglob("*") if p.is_dir())
    service = _service(case, tmp_path, sqlite=True)
    resume = import_claude_run(service, session, allow_side_effects=True)
    _resume(case, service, resume)
    _resume(case, service, import_claude_run(service, session / "workflows" / f"{case.run_id}.json"))
    assert snapshot() == before
    assert sorted(str(p) for p in session.rglob("*") if p.is_dir()) == dirs_before
