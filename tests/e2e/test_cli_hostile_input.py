"""Hostile workflow files through the command line: refusals with a rule and a line, valid JSON on
``validate --json``, exit codes, bounded time, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))

SURROGATE = "export const meta = { name: '\\uD800', description: 'd' }\nreturn 1\n"
DEEP = (
    "export const meta = { name: 'deep', description: 'd',\n  x: "
    + "[" * 20_000
    + "]" * 20_000
    + " }\nreturn 1\n"
)
DEEP_OBJECTS = (
    "export const meta = { name: 'deep', description: 'd',\n  x: "
    + "{a:" * 5_000
    + "1"
    + "}" * 5_000
    + " }\n"
)


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("source", "rule", "line"),
    [(SURROGATE, "meta-lone-surrogate", 1), (DEEP, "meta-too-deep", 2), (DEEP_OBJECTS, "meta-too-deep", 2)],
    ids=["lone-surrogate", "deep-arrays", "deep-objects"],
)
def test_validate_json_and_run_refuse_a_hostile_meta_with_its_rule_and_line(
    tmp_path: Path, source: str, rule: str, line: int
) -> None:
    wf = tmp_path / "hostile.js"
    wf.write_text(source)
    checked = cli("validate", str(wf), "--json", cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    report = json.loads(checked.stdout)
    assert report["valid"] is False
    assert [(e["rule"], e["line"]) for e in report["errors"]] == [(rule, line)]
    ran = cli("run", str(wf), "--provider", "fake", cwd=tmp_path)
    assert ran.returncode == 2 and ran.stdout == ""
    assert f"hostile.js:{line}:" in ran.stderr and f"[{rule}]" in ran.stderr
    for p in (checked, ran):
        assert "Traceback" not in p.stderr and "internal error" not in p.stderr


def test_meta_nested_five_hundred_deep_validates_and_runs_as_in_claude_code(tmp_path: Path) -> None:
    # Claude Code 2.1.332 runs it (measured); this once overflowed Python's recursion and hung `run`.
    wf = tmp_path / "deep.js"
    wf.write_text(
        "export const meta = { name: 'deep', description: 'd', x: "
        + "{a:" * 500
        + "1"
        + "}" * 500
        + " }\nreturn 7\n"
    )
    assert cli("validate", str(wf), cwd=tmp_path).returncode == 0
    ran = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == 7


def test_lone_surrogates_made_at_run_time_are_stored_and_printed_as_u_fffd(tmp_path: Path) -> None:
    # Once: `internal error: UnicodeEncodeError` and the run left interrupted (final value, child args).
    (tmp_path / "child.js").write_text(
        "export const meta = { name: 'child', description: 'd' }\nreturn { got: args.s }\n"
    )
    wf = tmp_path / "parent.js"
    wf.write_text(
        "export const meta = { name: 'parent', description: 'd' }\n"
        "const s = 'x\\uD800'\nlog(s)\n"
        "const child = await workflow({ scriptPath: './child.js' }, { s })\n"
        "return { [s]: s, child, text: await agent(s, { label: s }) }\n"
    )
    ran = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"x\ufffd": "x\ufffd", "child": {"got": "x\ufffd"}, "text": "x\ufffd"}
    listed = cli("runs", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout
