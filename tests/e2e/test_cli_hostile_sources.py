"""Sources built to read differently to the static checks and to V8, through the real command line.

``validate`` and ``run`` must give one verdict in the same words, and no construct may let workflow
code reach the host: every payload here tries to run a shell command that creates ``pwned``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"

META = "export const meta = { name: 'hostile', description: 'tries to escape' }\n"
PAYLOAD = (
    "let r = 'contained'\n"
    "try { await import('x') } catch (e) {\n"
    "  try { e.constructor.constructor('return process')().mainModule.require('child_process')"
    ".execSync('touch pwned'); r = 'ESCAPED' } catch (x) { r = 'contained: ' + x.name }\n"
    "}\n"
    "return r\n"
)
HTML_TRICK = META + "const x = 1 <!-- `\n" + PAYLOAD + "// `\n"


def cli(*argv: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


SOURCES = [
    pytest.param(HTML_TRICK, "html-comment", id="html-comment-hiding-an-import"),
    pytest.param(META + "// note\u2028" + PAYLOAD, "dynamic-import", id="u2028-ends-the-comment"),
    pytest.param(META + "// note\u2029" + PAYLOAD, "dynamic-import", id="u2029-ends-the-comment"),
    pytest.param(
        META + ";--> " + PAYLOAD.replace("\n", " "), "html-comment", id="close-comment-after-the-meta"
    ),
    pytest.param("\ufeff#!/usr/bin/env node\n" + META + "return 1\n", "syntax", id="hashbang-after-a-bom"),
    pytest.param(META + "return String.raw`a\\u{zz}b`\n", None, id="string-raw-invalid-escapes"),
    pytest.param("#!/usr/bin/env node\n" + META + "return 9\n", None, id="leading-hashbang"),
    pytest.param(META + "let x = 3\nwhile (x-->0) {}\nreturn x\n", None, id="decrement-greater"),
]


@pytest.mark.parametrize(("source", "rule"), SOURCES)
def test_validate_and_run_give_one_verdict_in_the_same_words(
    tmp_path: Path, source: str, rule: str | None
) -> None:
    wf = tmp_path / "hostile.js"
    wf.write_text(source, encoding="utf-8")
    checked = cli("validate", str(wf), "--json", cwd=tmp_path)
    report = json.loads(checked.stdout)
    ran = cli("run", str(wf), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert "Traceback" not in ran.stderr + checked.stderr
    assert not (tmp_path / "pwned").exists()
    if rule is None:
        assert report["valid"] and checked.returncode == 0
        assert ran.returncode == 0, ran.stderr
        return
    assert not report["valid"] and checked.returncode == 1
    first = report["errors"][0]
    assert first["rule"] == rule and first["line"] is not None
    assert ran.returncode == 2
    assert f":{first['line']}:{first['column']}: {first['message']} [{rule}]" in ran.stderr


def test_a_child_workflow_hiding_an_import_is_refused_and_never_runs(tmp_path: Path) -> None:
    (tmp_path / "child.js").write_text(HTML_TRICK, encoding="utf-8")
    parent = tmp_path / "parent.js"
    parent.write_text(
        "export const meta = { name: 'parent', description: 'runs a child' }\n"
        "try { return await workflow({ scriptPath: 'child.js' }) } catch (e) { return 'refused: ' + e.message }\n",
        encoding="utf-8",
    )
    ran = cli("run", str(parent), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result.startswith("refused: ") and "child.js:2:13: nested workflow:" in result
    assert result.endswith("[html-comment]")
    assert not (tmp_path / "pwned").exists()


def test_an_imported_claude_record_hiding_an_import_is_refused(tmp_path: Path) -> None:
    session = tmp_path / "session"
    shutil.copytree(FIXTURES / "plain" / "session", session)
    (record_path,) = (session / "workflows").glob("wf_*.json")
    record = json.loads(record_path.read_text())
    hostile = HTML_TRICK.replace("'hostile'", f"'{record['workflowName']}'")
    record["script"] = hostile
    record_path.write_text(json.dumps(record))
    for saved in (session / "workflows" / "scripts").glob("*.js"):
        saved.write_text(hostile, encoding="utf-8")
    ran = cli("resume", str(record_path), "--provider", "fake", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert "[html-comment]" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("profile", ["claude-code/2.1.332", "claude-code/2.1.209"])
def test_a_plain_import_never_reaches_the_host_under_any_profile(tmp_path: Path, profile: str) -> None:
    wf = tmp_path / "plain-import.js"
    wf.write_text(META + PAYLOAD, encoding="utf-8")
    ran = cli("run", str(wf), "--provider", "fake", "--events", "none", "--profile", profile, cwd=tmp_path)
    assert not (tmp_path / "pwned").exists()
    if profile == "claude-code/2.1.332":
        assert ran.returncode == 2 and "[dynamic-import]" in ran.stderr
    else:
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout) == "contained: EvalError"
