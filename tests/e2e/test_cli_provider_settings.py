"""A named ``cli`` provider as a user configures it in ``$WORKFLOW_MCP_HOME/config.toml``: a setting
the provider refuses is named by its own key (never reported as "no command configured"), a missing
program is named as the first item of ``command``, and the program is asked its ``--version`` once per
command, a reply that holds no version showing as none. Real ``workflow-mcp`` processes and a real
agent program (a shell script that logs how it was called)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
BOUND_S = 60
ONE_CALL = """export const meta = { name: 'one-call', description: 'one agent call' }
return await agent('hello', { label: 'only' })
"""
# Answers every call with the start of its prompt; `--version` gets what VERSION_REPLY says.
AGENT = """#!/bin/sh
echo "args=$*" >> "{log}"
if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi
echo "agent says: $(head -c 20)"
"""


def configured(tmp_path: Path, table: str) -> Path:
    """A project in ``tmp_path`` whose user configuration holds ``table``; returns the file."""
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "one.js").write_text(ONE_CALL)
    config = tmp_path / "state" / "config.toml"
    config.write_text(table)
    return config


def agent(tmp_path: Path, version: str) -> tuple[Path, Path]:
    """The agent program (answering ``--version`` with ``version``) and the log of its calls."""
    log = tmp_path / "calls.log"
    program = tmp_path / "agent.sh"
    program.write_text(AGENT.format(log=log, version=version))
    program.chmod(0o755)
    return program, log


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    return subprocess.run([CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=BOUND_S)


def row(providers_output: str, name: str) -> tuple[list[str], str]:
    """The tab-separated row of provider ``name`` and the line under it."""
    lines = providers_output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{name}\t"))
    return lines[at].split("\t"), (lines[at + 1] if at + 1 < len(lines) else "")


def test_a_command_given_as_one_string_is_refused_naming_the_named_providers_own_key(tmp_path: Path) -> None:
    config = configured(tmp_path, '[providers.mine]\nuse = "cli"\ncommand = "/bin/echo"\n')

    ran = cli("run", "one.js", "--provider", "mine", "--events", "none", cwd=tmp_path)
    listed = cli("providers", cwd=tmp_path)

    assert ran.returncode == 2
    assert (
        ran.stderr == f"workflow-mcp: {config}: providers.mine.command: must be a list of non-empty strings\n"
    )
    assert ran.stdout == "" and json.loads(cli("runs", "list", "--json", cwd=tmp_path).stdout)["runs"] == []
    cells, reason = row(listed.stdout, "mine")
    assert cells[1] == "unavailable"
    assert reason == f"  {config}: providers.mine.command: must be a list of non-empty strings"
    assert "no command configured" not in listed.stdout.split("\nmine\t")[1]


def test_a_setting_the_cli_provider_does_not_have_is_named_before_its_program_is_started(
    tmp_path: Path,
) -> None:
    program, log = agent(tmp_path, "agent 1.0.0")
    config = configured(tmp_path, f'[providers.mine]\nuse = "cli"\ncommand = ["{program}"]\ntimeout = 5\n')

    ran = cli("run", "one.js", "--provider", "mine", "--events", "none", cwd=tmp_path)

    assert ran.returncode == 2
    assert ran.stderr.startswith(
        f"workflow-mcp: {config}: providers.mine.timeout: unknown setting; expected one of"
    )
    assert not log.exists()


def test_a_program_that_is_not_there_is_named_as_the_first_item_of_command(tmp_path: Path) -> None:
    gone = tmp_path / "no-such-agent"
    configured(tmp_path, f'[providers.mine]\nuse = "cli"\ncommand = ["{gone}", "{{prompt_file}}"]\n')

    ran = cli("run", "one.js", "--provider", "mine", "--events", "none", cwd=tmp_path)
    _, reason = row(cli("providers", cwd=tmp_path).stdout, "mine")

    said = f"the program '{gone}' (the first item of command) is not an executable file"
    assert ran.returncode == 2
    assert ran.stderr == f"workflow-mcp: --provider: provider 'mine' is not available: {said}\n"
    assert reason == f"  {said}"


def test_the_program_is_asked_its_version_once_per_command(tmp_path: Path) -> None:
    program, log = agent(tmp_path, "agent 1.2.3")
    configured(tmp_path, f'[providers.mine]\nuse = "cli"\ncommand = ["{program}"]\n')

    ran = cli("run", "one.js", "--provider", "mine", "--events", "none", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == "agent says: hello"
    assert log.read_text().splitlines() == ["args=--version", "args="]  # one probe, one call

    log.unlink()
    cells, _ = row(cli("providers", cwd=tmp_path).stdout, "mine")
    assert cells[1:3] == ["ready", "1.2.3"]
    assert log.read_text().splitlines() == ["args=--version"]


def test_a_version_reply_without_a_version_number_shows_no_version(tmp_path: Path) -> None:
    program, _ = agent(tmp_path, "agent says:")  # what a program that treats --version as a prompt prints
    configured(tmp_path, f'[providers.mine]\nuse = "cli"\ncommand = ["{program}"]\n')

    cells, _ = row(cli("providers", cwd=tmp_path).stdout, "mine")

    assert cells[1:3] == ["ready", "-"]
