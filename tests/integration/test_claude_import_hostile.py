"""Damaged Claude Code journals and records: each bad journal line is skipped with a diagnostic (its
call runs live), a bad record is refused as a whole, and a replayed result is checked against the
call's schema first. Inputs are the golden ``plain`` run (``facts`` with a schema, then ``summary``
and ``review``) with one line damaged at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workflow_mcp.engine.claude_import import ClaudeRunFormatError, import_claude_run, read_claude_run
from workflow_mcp.engine.run import RunOptions
from workflow_mcp.events import Event
from workflow_mcp.providers import FakeProvider
from workflow_mcp.service import WorkflowService
from workflow_mcp.store import SqliteStore

from claude_cases import ClaudeCase, git_repo
from helpers import arun

CASE = ClaudeCase("plain")
CLI = str(Path(sys.executable).with_name("workflow-mcp"))


def damaged(tmp_path: Path, label: str, result_json: str) -> Path:
    """A copy of the session whose ``result`` line for ``label`` carries ``result_json`` verbatim."""
    session = CASE.copy_session(tmp_path)
    journal = session / "subagents" / "workflows" / CASE.run_id / "journal.jsonl"
    agent = next(line["agentId"] for line in CASE.journal() if line.get("label") == label)
    lines = []
    for raw in journal.read_text(encoding="utf-8").splitlines():
        entry = json.loads(raw)
        if entry.get("type") == "result" and entry.get("agentId") == agent:
            raw = raw.replace(json.dumps(entry["result"], separators=(",", ":")), result_json, 1)
            assert result_json in raw
        lines.append(raw)
    journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return session


class Resumed:
    def __init__(self, result: Any, events: list[Event], provider: FakeProvider) -> None:
        self.result = result
        self.events = events
        self.provider = provider

    def labels(self, event_type: str) -> list[str]:
        return [str(e.payload.get("label")) for e in self.events if e.type == event_type]

    @property
    def warnings(self) -> list[str]:
        return [str(e.payload["message"]) for e in self.events if e.type == "warning"]

    @property
    def live(self) -> list[str]:
        return [r.label for r in self.provider.calls]


def resume(tmp_path: Path, session: Path) -> Resumed:
    """Import ``session`` and resume it through the service on a SQLite store (what the CLI does)."""
    service = WorkflowService(
        SqliteStore(str(tmp_path / "state.db")),
        cwd=str(git_repo(CASE.project(tmp_path))),
        home=str(tmp_path / "home"),
    )
    imported = import_claude_run(service, session)
    replays = {imported.resumed_from: imported.replay}
    service.replay_for = lambda run_id, policy: replays[run_id]  # type: ignore[method-assign]
    provider = FakeProvider(CASE.fake)

    async def go() -> Resumed:
        handle = service.start_run(
            imported.workflow,
            provider=provider,
            args=imported.args,
            options=RunOptions(profile=imported.profile, cwd=service.cwd, home=service.home),
            resume_from=imported.resumed_from,
            policy=imported.replay.policy,
        )
        result = await handle.result()
        return Resumed(result, service.events(handle.run_id), provider)

    return arun(go())


@pytest.mark.parametrize(
    ("label", "result_json", "why"),
    [
        ("review", "NaN", "it holds NaN, which JSON does not allow"),
        ("review", '{"a":-Infinity}', "it holds -Infinity, which JSON does not allow"),
        ("summary", '"\\ud800 lone"', "lone UTF-16 surrogate"),
        ("summary", '{"\\udfff":1}', "a key holds a lone UTF-16 surrogate"),
        ("review", "[" * 300 + "]" * 300, "nested deeper than 256 levels"),
    ],
    ids=["nan", "infinity", "lone-surrogate", "lone-surrogate-key", "deep-result"],
)
def test_a_result_line_that_cannot_be_replayed_is_skipped_with_a_diagnostic_and_its_call_runs_live(
    tmp_path: Path, label: str, result_json: str, why: str
) -> None:
    session = damaged(tmp_path, label, result_json)
    run = read_claude_run(session)
    assert run.skipped_lines == 1 and len(run.records) == 2
    (diagnostic,) = run.diagnostics
    assert (
        diagnostic.startswith("journal.jsonl line ")
        and why in diagnostic
        and "the call runs live" in diagnostic
    )

    resumed = resume(tmp_path, session)
    assert resumed.result == CASE.claude_result
    assert resumed.live == (["review"] if label == "review" else ["summary", "review"])  # prefix policy
    assert diagnostic in resumed.warnings


def test_a_line_nested_100000_deep_is_skipped_with_a_diagnostic(tmp_path: Path) -> None:
    session = CASE.copy_session(tmp_path)
    journal = session / "subagents" / "workflows" / CASE.run_id / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    deep = '{"type":"result","key":"v2:x","result":' + "[" * 100_000 + "]" * 100_000 + "}"
    journal.write_text("\n".join([lines[0], deep, *lines[1:]]) + "\n", encoding="utf-8")

    run = read_claude_run(session)
    assert run.skipped_lines == 1 and len(run.records) == 3
    assert run.diagnostics == (
        "journal.jsonl line 2: it is not usable JSON (it is nested too deeply to read); skipped (a result "
        "line's call runs live)",
    )
    resumed = resume(tmp_path, session)
    assert resumed.live == [] and resumed.result == CASE.claude_result


def test_a_result_of_the_wrong_shape_is_checked_against_the_schema_and_runs_live(tmp_path: Path) -> None:
    session = damaged(tmp_path, "facts", '{"facts":"not an array"}')
    assert len(read_claude_run(session).records) == 3  # well-formed JSON: only the schema can tell

    resumed = resume(tmp_path, session)
    assert resumed.result == CASE.claude_result
    assert resumed.live == ["facts", "summary", "review"]  # the prefix ends at the refused record
    (warning,) = [w for w in resumed.warnings if "[facts]" in w]
    assert "the recorded result is not replayed: it does not match the call's schema" in warning
    assert "(/facts: must be array)" in warning and "the call runs live" in warning


def test_a_text_call_whose_record_holds_an_object_runs_live(tmp_path: Path) -> None:
    session = damaged(tmp_path, "review", '{"not":"text"}')
    resumed = resume(tmp_path, session)
    assert resumed.live == ["review"]
    assert any("resolves to a string, but the record holds an object" in w for w in resumed.warnings)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ('{"topic":"moon","n":NaN}', "it holds NaN, which JSON does not allow"),
        ('{"topic":"\\ud800"}', "its args cannot be replayed: it holds a lone UTF-16 surrogate"),
        ('{"topic":' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply to read"),
    ],
    ids=["nan", "lone-surrogate", "deep"],
)
def test_a_record_whose_args_cannot_be_replayed_is_refused_as_a_whole(
    tmp_path: Path, args: str, says: str
) -> None:
    session = CASE.copy_session(tmp_path)
    record = session / "workflows" / CASE.record_path.name
    fields = json.loads(record.read_text(encoding="utf-8"))
    fields["args"] = "@ARGS@"
    record.write_text(json.dumps(fields, indent=2).replace('"@ARGS@"', args, 1), encoding="utf-8")

    with pytest.raises(ClaudeRunFormatError) as caught:
        read_claude_run(session)
    assert says in str(caught.value) and "not a usable Claude Code run record" in str(caught.value)

    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [CLI, "resume", str(record), "--provider", "fake"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and says in p.stderr
    assert "Traceback" not in p.stderr and "    at " not in p.stderr  # no Python or Node stack


@pytest.mark.parametrize("damage", ["lone-surrogate-in-record", "scripts-file-not-utf8"])
def test_a_saved_script_that_is_not_text_refuses_the_record_naming_why(tmp_path: Path, damage: str) -> None:
    # Once both were `internal error: UnicodeEncodeError` / `UnicodeDecodeError` from `resume`.
    session = CASE.copy_session(tmp_path)
    record = session / "workflows" / CASE.record_path.name
    scripts = list((session / "workflows" / "scripts").glob("*.js"))
    fields = json.loads(record.read_text(encoding="utf-8"))
    if damage == "lone-surrogate-in-record":
        fields["script"] += "\n// \ud800"
        for script in scripts:
            script.unlink()  # the record's own copy is then the script
        says = "its script cannot be run: it holds a lone UTF-16 surrogate"
    else:
        fields.pop("script", None)
        for script in scripts:
            script.write_bytes(script.read_bytes() + b"\n// \xff\n")
        says = "its saved script is not UTF-8 (byte "
    record.write_text(json.dumps(fields), encoding="utf-8")

    with pytest.raises(ClaudeRunFormatError) as caught:
        read_claude_run(session)
    assert says in str(caught.value)
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    p = subprocess.run(
        [CLI, "resume", str(record), "--provider", "fake"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and says in p.stderr and "internal error" not in p.stderr
