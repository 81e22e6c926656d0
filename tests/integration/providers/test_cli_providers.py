"""The command line meets providers: ``workflow-mcp providers``, configuration-driven runs, bad
configuration refused before anything runs, and the no-configuration pick of a ready provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codex_kit import CodexSetup

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
WORKFLOW = "export const meta = { name: 'p', description: 'one agent' }\nreturn await agent('say ECHO:cli')\n"


def cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY")}
    e = {**base, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home"), **(env or {})}
    return subprocess.run([CLI, *argv], cwd=cwd, env=e, capture_output=True, text=True, timeout=120)


def test_providers_json_lists_each_provider_with_availability_and_capabilities(tmp_path: Path) -> None:
    p = cli("providers", "--json", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-do-not-print"})
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    by_name = {d["name"]: d for d in doc["providers"]}
    assert by_name["fake"]["available"] is True
    assert by_name["fake"]["capabilities"]["structuredOutput"] is True
    assert doc["policy"]["sandbox"] == "workspace-write" and doc["policy"]["network"] is False
    assert "sk-do-not-print" not in p.stdout


def test_providers_prints_one_line_per_provider(tmp_path: Path) -> None:
    p = cli("providers", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert any(line.startswith("fake\tready") for line in p.stdout.splitlines())


def test_a_run_follows_the_project_configuration(tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(WORKFLOW)
    (tmp_path / "s.json").write_text('{"default": {"text": "configured fake"}}')
    (tmp_path / "workflow-mcp.toml").write_text(
        f'default = "fake"\n[providers.fake]\nscript = "{tmp_path / "s.json"}"\n'
    )
    p = cli("run", "wf.js", "--events", "none", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == "configured fake"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("default = [", "not valid TOML"),
        ('default = "nope"', "default: unknown provider 'nope'"),
        (
            'default = "fake"\n[[rules]]\nlabel = "x"\nprovider = "ghost"',
            "rules[0].provider: unknown provider 'ghost'",
        ),
    ],
)
def test_bad_configuration_exits_2_naming_the_file_and_key_before_anything_runs(
    tmp_path: Path, toml: str, needle: str
) -> None:
    (tmp_path / "wf.js").write_text(WORKFLOW)
    (tmp_path / "workflow-mcp.toml").write_text(toml)
    p = cli("run", "wf.js", "--events", "jsonl", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert str(tmp_path / "workflow-mcp.toml") in p.stderr and needle in p.stderr
    assert "run.started" not in p.stderr and "Traceback" not in p.stderr


def test_the_fake_script_option_still_needs_the_fake_provider(tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(WORKFLOW)
    p = cli("run", "wf.js", "--fake-script", "s.json", cwd=tmp_path)
    assert p.returncode == 2 and "--fake-script applies only to --provider fake" in p.stderr


def test_a_configured_codex_run_reaches_the_mock_model(codex: CodexSetup) -> None:
    cwd = codex.cwd
    (cwd / "wf.js").write_text(WORKFLOW)
    (cwd / "workflow-mcp.toml").write_text(
        f'default = "codex"\n[providers.codex]\ncodex_home = "{codex.home}"\nenv = ["MOCK_API_KEY"]\n'
    )
    p = cli("run", "wf.js", "--events", "none", cwd=cwd, env={"MOCK_API_KEY": "mock-key"})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == "cli-done"


def test_without_a_chosen_provider_the_cli_picks_a_ready_codex_and_says_so(codex: CodexSetup) -> None:
    cwd = codex.cwd
    (cwd / "wf.js").write_text(WORKFLOW)
    # The user file only lets the mock's key name through; it chooses no provider. CODEX_HOME's
    # config.toml names a custom model provider, so codex counts as ready (it brings its own key).
    (cwd / "state").mkdir()
    (cwd / "state" / "config.toml").write_text('[policy]\nenv = ["MOCK_API_KEY"]\n')
    p = cli(
        "run",
        "wf.js",
        "--events",
        "none",
        cwd=cwd,
        env={"CODEX_HOME": str(codex.home), "MOCK_API_KEY": "mock-key"},
    )
    assert p.returncode == 0, p.stderr
    assert "no provider configured; using codex" in p.stderr
    assert json.loads(p.stdout) == "cli-done"


def test_without_the_key_name_allowlisted_the_mock_key_never_reaches_codex(codex: CodexSetup) -> None:
    cwd = codex.cwd
    (cwd / "wf.js").write_text(WORKFLOW)
    p = cli(
        "run",
        "wf.js",
        "--events",
        "none",
        "--provider",
        "codex",
        cwd=cwd,
        env={"CODEX_HOME": str(codex.home), "MOCK_API_KEY": "mock-key"},
    )
    assert p.returncode == 1
    assert "Missing environment variable: `MOCK_API_KEY`" in p.stderr
