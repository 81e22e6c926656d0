"""The command line as a user meets it: exit codes, stdout/stderr discipline, no tracebacks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
REPO = Path(__file__).resolve().parents[2]


def cli(
    *argv: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    e.update(env or {})
    return subprocess.run([CLI, *argv], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


OK = "export const meta = { name: 'ok', description: 'returns its args' }\nreturn { got: args, r: await agent('hi') }\n"


def no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout


def test_run_prints_only_the_final_value_on_stdout_and_events_on_stderr(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("run", str(wf), '{"a": 1}', "--provider", "fake", "--events", "jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"got": {"a": 1}, "r": "hi"}
    events = [json.loads(line) for line in p.stderr.splitlines()]
    assert events[0]["type"] == "run.started" and events[0]["runId"].startswith("run_")
    assert events[-1]["type"] == "run.completed"
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))


def test_events_none_prints_only_the_run_id_on_stderr_on_success(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert p.returncode == 0 and re.fullmatch(r"workflow-mcp: run run_\w+ started\n", p.stderr)
    assert json.loads(p.stdout) == {"r": "hi"}  # args undefined: the key is dropped by the JSON clone


def test_args_file_is_read_as_one_json_value(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    args = write(tmp_path / "args.json", '["x", 2]')
    p = cli("run", str(wf), "--args-file", str(args), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert json.loads(p.stdout)["got"] == ["x", 2]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "ok.js", "{not json", "--provider", "fake"], "not valid JSON"),
        (["run", "missing.js", "--provider", "fake"], "does not exist"),
        (["run", "no-such-name", "--provider", "fake"], "no-such-name"),
        (["run", "ok.js"], "--provider fake"),
        (["run", "ok.js", "--provider", "nope"], "unknown provider"),
        (["run", "ok.js", "--provider", "fake", "--fake-script", "missing.json"], "fake script"),
        (["run", "ok.js", "--provider", "fake", "--profile", "claude-code/0.0.1"], "unknown profile"),
        (["run", "ok.js", "--args-file", "missing.json", "--provider", "fake"], "cannot read"),
        (["validate", "missing.js"], "missing.js"),
        (["runs", "show", "run_nope"], "no stored run"),
        (["resume", "run_nope"], "no stored run 'run_nope' and no such file"),
        (["runs", "cancel", "run_nope"], "no stored run"),
        (["list", "not-a-dir"], "not a directory"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path, argv: list[str], needle: str) -> None:
    write(tmp_path / "ok.js", OK)
    p = cli(*argv, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert needle in p.stderr
    assert p.stdout == ""
    no_traceback(p)


def test_an_invalid_workflow_is_refused_before_anything_runs(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "bad.js", "export let meta = { name: 'x', description: 'y' }\nawait agent('never')\n"
    )
    p = cli("run", str(wf), "--provider", "fake", cwd=tmp_path)
    assert p.returncode == 2 and "meta" in p.stderr and "bad.js:1:" in p.stderr
    assert not (tmp_path / "state" / "state.db").exists() or "agent.started" not in p.stderr


def test_a_syntax_error_is_reported_with_its_line_and_column(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "bad.js", "export const meta = { name: 'x', description: 'y' }\nconst a = 1\nconst a = 2\n"
    )
    p = cli("run", str(wf), "--provider", "fake", cwd=tmp_path)
    assert p.returncode == 2 and "bad.js:3:7" in p.stderr and "already been declared" in p.stderr


def test_a_crashing_workflow_exits_1_with_its_message(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "crash.js",
        "export const meta = { name: 'c', description: 'd' }\nthrow new Error('kaboom')\n",
    )
    p = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert p.returncode == 1 and "kaboom" in p.stderr and p.stdout == ""
    no_traceback(p)


def test_a_hanging_workflow_is_stopped_by_the_synchronous_limit(tmp_path: Path) -> None:
    wf = write(tmp_path / "hang.js", "export const meta = { name: 'h', description: 'd' }\nwhile (true) {}\n")
    p = cli(
        "run", str(wf), "--provider", "fake", "--sync-timeout-ms", "300", "--events", "none", cwd=tmp_path
    )
    assert p.returncode == 1 and "synchronously" in p.stderr
    no_traceback(p)


def test_a_saved_workflow_runs_by_name_from_the_project_directory(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path / ".claude" / "workflows" / "greet.js", OK.replace("'ok'", "'greet'"))
    p = cli("run", "greet", "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout) == {"r": "hi"}


def test_validate_prints_json_and_exit_codes(tmp_path: Path) -> None:
    good = write(tmp_path / "good.js", OK)
    bad = write(tmp_path / "bad.js", "export const meta = { name: '', description: 'd' }\n")
    p = cli("validate", str(good), "--json", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout)["meta"] == {
        "name": "ok",
        "description": "returns its args",
    }
    p = cli("validate", str(bad), "--json", cwd=tmp_path)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["valid"] is False and doc["errors"][0]["rule"] == "meta-name"
    p = cli("validate", str(bad), cwd=tmp_path)
    assert p.returncode == 1 and "bad.js:1:" in p.stderr


def test_validate_resolves_each_agent_type_from_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    definition = write(
        tmp_path / ".claude/agents/auditor.md", "---\nname: auditor\ndescription: d\n---\nAudit.\n"
    )
    broken = write(tmp_path / ".claude/agents/broken.md", "---\nname: broken\n---\nB\n")
    source = (
        "export const meta = { name: 'typed', description: 'asks for agent types' }\n"
        "await agent('a', { agentType: 'auditor' })\n"
        "return await agent('b', { agentType: 'nobody' })\n"
    )
    path = write(tmp_path / "typed.js", source)
    p = cli("validate", str(path), "--json", cwd=tmp_path)
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["valid"] is True
    assert [(a["name"], a["resolves"], a["path"]) for a in doc["agentTypes"]] == [
        ("auditor", True, str(definition)),
        ("nobody", False, None),
    ]
    assert [(e["path"], e["line"]) for e in doc["agentFileProblems"]] == [(str(broken), 2)]
    p = cli("validate", str(path), cwd=tmp_path)
    assert p.returncode == 0
    assert f"agent type 'auditor': project, {definition}:2" in p.stdout
    assert f"{path}:3: warning: agent type 'nobody' does not resolve from {tmp_path}" in p.stderr
    assert f"{broken}:2: warning: agent file skipped: its frontmatter has no `description`" in p.stderr


def test_runs_list_show_and_events_read_the_store(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    p = cli("run", str(wf), "--provider", "fake", "--events", "jsonl", cwd=tmp_path)
    run_id = json.loads(p.stderr.splitlines()[0])["runId"]
    listed = json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"]
    assert [(r["runId"], r["status"]) for r in listed] == [(run_id, "completed")]
    shown = json.loads(cli("runs", "show", run_id, "--json", cwd=tmp_path).stdout)
    assert shown["status"] == "completed" and shown["result"] == {"r": "hi"}
    events = cli("runs", "events", run_id, "--after", "2", "--json", cwd=tmp_path).stdout.splitlines()
    assert json.loads(events[0])["sequence"] == 3
    assert len(events) == len(p.stderr.splitlines()) - 2


def test_runs_show_lists_the_phase_list_meta_phases_first(tmp_path: Path) -> None:
    wf = write(
        tmp_path / "phases.js",
        "export const meta = { name: 'phases', description: 'd', phases: [{ title: 'Plan' }, { title: 'Never' }] }\n"
        "phase('Plan')\nawait agent('p')\nawait agent('q', { phase: 'Adhoc' })\nreturn 1\n",
    )
    p = cli("run", str(wf), "--provider", "fake", "--events", "jsonl", cwd=tmp_path)
    run_id = json.loads(p.stderr.splitlines()[0])["runId"]
    shown = cli("runs", "show", run_id, cwd=tmp_path).stdout.splitlines()
    assert [line for line in shown if line.startswith("  phase ")] == [
        "  phase Plan: completed",
        "  phase Never: pending",
        "  phase Adhoc: completed",
    ]


def test_resume_replays_a_finished_run_without_calling_the_provider(tmp_path: Path) -> None:
    wf = write(tmp_path / "ok.js", OK)
    first = cli("run", str(wf), "--provider", "fake", "--events", "jsonl", cwd=tmp_path)
    run_id = json.loads(first.stderr.splitlines()[0])["runId"]
    again = cli("resume", run_id, "--events", "jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    types = [json.loads(line)["type"] for line in again.stderr.splitlines()]
    assert "agent.cached" in types and "agent.started" not in types
    assert json.loads(again.stdout) == json.loads(first.stdout)


BUDGETED = (
    "export const meta = { name: 'budgeted', description: 'calls until its budget is spent' }\n"
    "let n = 0\n"
    "while (n < 50 && budget.remaining() > 0) { await agent('call ' + n, { label: 'c' + n }); n++ }\n"
    "return n\n"
)


def test_resume_keeps_the_runs_budget_narrows_it_on_request_and_refuses_to_widen_it(tmp_path: Path) -> None:
    wf = write(tmp_path / "budgeted.js", BUDGETED)
    script = write(tmp_path / "fake.json", '{"default": {"text": "ok", "tokens": {"output": 10}}}')
    fake = ["--provider", "fake", "--fake-script", str(script)]
    first = cli("run", str(wf), *fake, "--token-budget", "30", "--events", "jsonl", cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "3", first.stderr
    run_id = json.loads(first.stderr.splitlines()[0])["runId"]
    kept = cli("resume", run_id, "--events", "none", cwd=tmp_path)
    narrowed = cli("resume", run_id, "--token-budget", "20", "--events", "none", cwd=tmp_path)
    widened = cli("resume", run_id, "--token-budget", "31", "--events", "none", cwd=tmp_path)
    assert (kept.returncode, kept.stdout.strip()) == (0, "3"), kept.stderr
    assert (narrowed.returncode, narrowed.stdout.strip()) == (0, "2"), narrowed.stderr
    assert widened.returncode == 2 and widened.stdout == ""
    assert f"run {run_id} ran with tokenBudget (--token-budget) 30" in widened.stderr
    no_traceback(widened)


def test_the_shipped_examples_run_on_the_fake_provider(tmp_path: Path) -> None:
    for example in sorted((REPO / "examples").glob("*.js")):
        script = example.with_suffix(".fake.json")
        argv = ["run", str(example), "--provider", "fake", "--events", "none"]
        if script.exists():
            argv += ["--fake-script", str(script)]
        p = cli(*argv, cwd=tmp_path)
        assert p.returncode == 0, (example.name, p.stderr)
        json.loads(p.stdout)


def test_a_relative_path_is_also_resolved_from_the_invoking_shells_pwd(tmp_path: Path) -> None:
    """A harness may start workflow-mcp in another directory yet pass paths relative to its own."""
    write(tmp_path / "cases" / "ok.js", OK)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = cli("validate", "cases/ok.js", "--json", cwd=elsewhere, env={"PWD": str(tmp_path)})
    assert p.returncode == 0 and json.loads(p.stdout)["valid"] is True
    p = cli("validate", "cases/nope.js", "--json", cwd=elsewhere, env={"PWD": str(tmp_path)})
    assert p.returncode == 2 and json.loads(p.stdout)["errors"][0]["rule"] == "not-found"


def test_a_childs_console_and_fan_out_failure_lines_carry_its_name(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(
        tmp_path / ".claude" / "workflows" / "kid.js",
        "export const meta = { name: 'kid', description: 'k' }\nconsole.log('hello from kid')\n"
        "await parallel([() => { throw new Error('slot boom') }])\nreturn 1\n",
    )
    par = write(
        tmp_path / "par.js",
        "export const meta = { name: 'par', description: 'p' }\nconsole.warn('parent says')\n"
        "return await workflow('kid', {})\n",
    )
    p = cli("run", str(par), "--provider", "fake", "--events", "jsonl", cwd=tmp_path)
    logs = [e["payload"]["message"] for e in map(json.loads, p.stderr.splitlines()) if e["type"] == "log"]
    assert logs == [
        "[warn] parent says",
        "▸ running dynamic workflow kid",
        "[kid] hello from kid",
        "[kid] parallel[0] failed: slot boom",
        "▸ kid done",
    ]
