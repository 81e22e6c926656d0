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


def test_the_fake_script_option_implies_the_fake_provider_and_refuses_another(tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(WORKFLOW)
    (tmp_path / "s.json").write_text('{"default": {"text": "scripted"}}')
    p = cli("run", "wf.js", "--fake-script", "s.json", "--events", "none", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == "scripted"
    p = cli("run", "wf.js", "--fake-script", "s.json", "--provider", "codex", cwd=tmp_path)
    assert (
        p.returncode == 2
        and "--fake-script applies only to --provider fake, not --provider codex" in p.stderr
    )


ALIAS = (
    "export const meta = { name: 'a', description: 'fan-out on a Claude alias' }\n"
    "return await parallel([() => agent('say ECHO:one', { model: 'sonnet' }), () => agent('say ECHO:two')])\n"
)


def test_an_unmapped_claude_alias_exits_2_naming_the_call_before_any_provider_call(codex: CodexSetup) -> None:
    cwd = codex.cwd
    (cwd / "wf.js").write_text(ALIAS)
    env = {"CODEX_HOME": str(codex.home), "MOCK_API_KEY": "mock-key"}
    p = cli("run", "wf.js", "--provider", "codex", "--events", "jsonl", cwd=cwd, env=env)
    assert p.returncode == 2, p.stderr
    assert f"{cwd / 'wf.js'}:2:30: this agent() call cannot run with this configuration" in p.stderr
    assert "model 'sonnet' is a Claude model alias" in p.stderr
    assert "there is no configuration file: create workflow-mcp.toml" in p.stderr
    assert "run.started" not in p.stderr and codex.mock.received == []
    # With a configuration file, the message names it and the table to add.
    (cwd / "workflow-mcp.toml").write_text('default = "codex"\n')  # CODEX_HOME comes from env
    p = cli("run", "wf.js", "--events", "none", cwd=cwd, env=env)
    assert p.returncode == 2, p.stderr
    assert f"map it in {cwd / 'workflow-mcp.toml'} under [providers.codex.models]" in p.stderr
    assert codex.mock.received == []


def test_a_run_whose_every_call_fails_for_one_configuration_reason_fails_with_it(codex: CodexSetup) -> None:
    cwd = codex.cwd
    # The model is only known at run time, so the run starts; every call is refused by routing.
    (cwd / "wf.js").write_text(
        "export const meta = { name: 'a', description: 'dynamic alias' }\n"
        "const r = await parallel([1, 2].map((i) => () => agent('say ECHO:' + i, { model: args.m })))\n"
        "return { verdict: r.every((x) => x === null) ? 'approve' : 'reject' }\n"
    )
    env = {"CODEX_HOME": str(codex.home), "MOCK_API_KEY": "mock-key"}
    p = cli("run", "wf.js", '{"m": "opus"}', "--provider", "codex", "--events", "none", cwd=cwd, env=env)
    assert p.returncode == 1, p.stderr
    assert (
        "failed: every agent call of this run (2) failed for one reason: model 'opus' is a Claude" in p.stderr
    )
    assert p.stdout == "" and codex.mock.received == []


def test_a_logged_out_provider_exits_2_before_anything_starts(tmp_path: Path) -> None:
    pytest.importorskip("openai_codex", reason="the codex extra is not installed")
    (tmp_path / "wf.js").write_text(WORKFLOW)
    (tmp_path / "codex-home").mkdir()  # no auth.json, no key, no custom model provider
    env = {"CODEX_HOME": str(tmp_path / "codex-home")}
    p = cli("run", "wf.js", "--provider", "codex", "--events", "jsonl", cwd=tmp_path, env=env)
    assert p.returncode == 2, p.stderr
    assert "provider 'codex' is not logged in: run `codex login` or set OPENAI_API_KEY" in p.stderr
    assert "run.started" not in p.stderr
    listed = cli("providers", cwd=tmp_path, env=env)
    (line,) = [x for x in listed.stdout.splitlines() if x.startswith("codex\t")]
    assert line.split("\t")[1] == "not logged in"


def test_a_configured_codex_run_reaches_the_mock_model(codex: CodexSetup) -> None:
    cwd = codex.cwd
    (cwd / "wf.js").write_text(WORKFLOW)
    # Where Codex's configuration lives and what environment it sees are the user's file's to say.
    (cwd / "state").mkdir()
    (cwd / "state" / "config.toml").write_text(
        f'[providers.codex]\ncodex_home = "{codex.home}"\nenv = ["MOCK_API_KEY"]\n'
    )
    (cwd / "workflow-mcp.toml").write_text('default = "codex"\n')
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


def test_the_configured_limits_give_calls_their_default_stall_window(tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(WORKFLOW)
    (tmp_path / "s.json").write_text('{"default": {"text": "late", "delayMs": 30000}}')
    (tmp_path / "workflow-mcp.toml").write_text("[limits]\nstall_ms = 40\nagent_timeout_ms = 20000\n")
    p = cli("run", "wf.js", "--fake-script", "s.json", "--events", "jsonl", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "agent stalled on all 6 attempts (no progress for 40 ms each)" in p.stderr
    (tmp_path / "workflow-mcp.toml").write_text("[limits]\nstall_ms = 0\n")
    p = cli("run", "wf.js", "--fake-script", "s.json", cwd=tmp_path)
    assert p.returncode == 2 and "limits.stall_ms: must be an integer from 1" in p.stderr


NAMED = """
default = "drafts"

[[rules]]
label = "other*"
provider = "scripted"

[providers.drafts]
use = "committer"

[providers.scripted]
use = "fake"
"""
PLUGIN = Path(__file__).resolve().parents[2] / "fixtures" / "agent_plugin"


def plugin_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "config.toml").write_text(NAMED)
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(PLUGIN), os.environ.get("PYTHONPATH", "")) if p)}


def test_providers_prints_the_capability_matrix_of_named_providers_and_presets(tmp_path: Path) -> None:
    env = plugin_env(tmp_path)
    p = cli("providers", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = lines[1].split("\t")
    assert header == [
        "provider", "state", "version", "login",
        "structured", "images", "sandbox", "network", "sessions", "usage", "streaming", "use",
    ]  # fmt: skip
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[2:] if not line.startswith("  ")}
    assert rows["drafts"][1] == "ready" and rows["drafts"][4] == "no" and rows["drafts"][11] == "committer"
    assert rows["scripted"][4:11] == ["yes", "no", "no", "yes", "no", "yes", "yes"]
    assert rows["gemini"][11] == "acp (preset)"
    doc = json.loads(cli("providers", "--json", cwd=tmp_path, env=env).stdout)
    by_name = {d["name"]: d for d in doc["providers"]}
    assert (by_name["drafts"]["use"], by_name["drafts"]["origin"]) == ("committer", "configured")
    assert by_name["drafts"]["capabilities"]["structuredOutput"] is False
    assert by_name["opencode"]["origin"] == "preset" and by_name["opencode"]["use"] == "acp"
    assert set(by_name["fake"]["capabilities"]) == {
        "structuredOutput", "images", "sandboxControl", "networkControl",
        "sessionResume", "tokenUsage", "streaming", "cancellation",
    }  # fmt: skip


def test_a_call_needing_a_capability_its_provider_lacks_exits_2_before_any_call(tmp_path: Path) -> None:
    env = plugin_env(tmp_path)
    (tmp_path / "wf.js").write_text(
        "export const meta = { name: 'needs', description: 'a schema call' }\n"
        "return await agent('x', { label: 'shape', schema: { type: 'object' } })\n"
    )
    p = cli("run", "wf.js", "--events", "jsonl", cwd=tmp_path, env=env)
    assert p.returncode == 2, p.stderr
    assert f"{tmp_path / 'wf.js'}:2:14:" in p.stderr
    assert "provider 'drafts' (chosen by default" in p.stderr
    assert "has no structured output capability" in p.stderr
    assert "e.g. 'scripted' (configured here)" in p.stderr
    assert "run.started" not in p.stderr and "agent.started" not in p.stderr
    forced = cli("run", "wf.js", "--provider", "scripted", "--events", "none", cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stderr  # --provider takes the named provider by its name
    assert json.loads(forced.stdout) == {}
