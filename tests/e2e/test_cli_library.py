"""``workflow-mcp library …`` and ``workflow-mcp validate PATH… --format github`` as a user (or a CI job)
runs them: real processes, a real state database, the runtime running what the library wrote."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from test_cli import CLI, cli, no_traceback, write

DEPLOY = "export const meta = { name: 'deploy', description: 'Ship it' }\nreturn { shipped: await agent('ship') }\n"


def _project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return tmp_path


def test_create_list_describe_run_and_delete_from_the_command_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    src = write(root / "deploy.src.js", DEPLOY)
    created = cli(
        "library", "create", str(src), "--version", "v1.0.0", "--tags", "ops, release", "--json", cwd=root
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["file"] == ".claude/workflows/deploy.js"
    assert (root / ".claude/workflows/deploy.js").read_text() == DEPLOY
    listed = cli("library", "list", "--tag", "OPS", "--json", cwd=root)
    assert [(w["name"], w["version"], w["tags"]) for w in json.loads(listed.stdout)["workflows"]] == [
        ("deploy", "1.0.0", ["ops", "release"])
    ]
    empty = cli("library", "list", "--tag", "nope", cwd=root)
    assert empty.returncode == 0 and empty.stdout == "" and "broaden" in empty.stderr
    # the runtime discovers and runs the library's file by name, as Claude Code would
    ran = cli("run", "deploy", "--provider", "fake", cwd=root)
    assert ran.returncode == 0, ran.stderr
    assert "shipped" in json.loads(ran.stdout)
    again = subprocess.run(
        [CLI, "library", "create", "-", "--version", "1.1.0"],
        input=DEPLOY.replace("Ship it", "Ship it again"),
        cwd=root, env={**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    old = cli("library", "describe", "deploy", "--version", "1.0.0", "--source", cwd=root)
    assert old.stdout == DEPLOY
    asked = cli("library", "delete", "deploy", "--json", cwd=root)  # stdin is not a terminal: two steps
    token = json.loads(asked.stdout)["confirmToken"]
    assert (root / ".claude/workflows/deploy.js").exists()
    deleted = cli("library", "delete", "deploy", "--confirm", token, cwd=root)
    assert deleted.returncode == 0 and "deleted deploy@1.1.0" in deleted.stdout
    assert not (root / ".claude/workflows").exists()
    replay = cli("library", "delete", "deploy", "--confirm", token, cwd=root)
    assert replay.returncode == 1 and "[confirmation_invalid]" in replay.stderr
    no_traceback(replay)


def test_a_draft_runs_as_name_at_draft_and_is_promoted(tmp_path: Path) -> None:
    root = _project(tmp_path)
    src = write(root / "d.js", DEPLOY)
    drafted = cli("library", "create", str(src), "--draft", "--tags", "wip", cwd=root)
    assert drafted.returncode == 0 and "deploy@draft" in drafted.stdout, drafted.stderr
    assert not (root / ".claude").exists()
    ran = cli("run", "deploy@draft", "--provider", "fake", cwd=root)
    assert ran.returncode == 0, ran.stderr
    promoted = cli("library", "create", str(src), "--json", cwd=root)
    assert json.loads(promoted.stdout)["promotedDraft"]
    gone = cli("run", "deploy@draft", "--provider", "fake", cwd=root)
    assert gone.returncode == 2 and "[not_found]" in gone.stderr  # as for any unknown workflow name
    no_traceback(gone)


def test_refusals_exit_1_with_a_typed_reason_and_the_loader_s_errors(tmp_path: Path) -> None:
    root = _project(tmp_path)
    bad = write(root / "bad.js", "export const meta = { name: 'bad' }\nreturn 1\n")
    p = cli("library", "create", str(bad), cwd=root)
    assert p.returncode == 1 and "[invalid_source]" in p.stderr and "bad" not in os.listdir(root / "home")
    assert "error:" in p.stderr and not (root / ".claude").exists()
    v = cli("library", "create", str(bad), "--version", "1.0", "--json", cwd=root)
    assert v.returncode == 1 and json.loads(v.stdout)["reason"] == "invalid_version"
    missing = cli("library", "describe", "nothing", cwd=root)
    assert missing.returncode == 1 and "[not_found]" in missing.stderr
    for q in (p, v, missing):
        no_traceback(q)


def test_of_concurrent_creates_in_separate_processes_exactly_one_wins(tmp_path: Path) -> None:
    root = _project(tmp_path)
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")}
    cli("library", "list", cwd=root)  # create the state database first, so only the create races
    sources = [write(root / f"s{i}.js", DEPLOY.replace("Ship it", f"writer {i}")) for i in range(4)]
    procs = [
        subprocess.Popen(
            [CLI, "library", "create", str(s), "--version", "2.0.0", "--json"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in sources
    ]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert "Traceback" not in err
        outcomes.append(json.loads(out).get("status") or json.loads(out)["reason"])
    assert sorted(outcomes) == ["already_exists"] * 3 + ["created"]
    assert os.listdir(root / ".claude/workflows") == ["deploy.js"]


def test_validate_checks_files_and_directories_and_annotates_for_github(tmp_path: Path) -> None:
    root = _project(tmp_path)
    write(root / ".claude/workflows/good.js", DEPLOY)
    write(
        root / ".claude/workflows/bad.js",
        "export const meta = { name: 'bad', description: 1 + 1 }\nreturn 1\n",
    )
    write(root / "plugins/p/workflows/plug.js", DEPLOY.replace("deploy", "plug"))
    write(root / "node_modules/x/workflows/skip.js", "not a workflow")
    lone = write(root / "lone.js", DEPLOY.replace("deploy", "lone"))
    p = cli("validate", str(root), str(lone), "--format", "github", cwd=root)
    assert p.returncode == 1
    errors = [line for line in p.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error file=.claude/workflows/bad.js,line=1,col=")
    assert "4 workflow file(s) checked, 1 invalid" in p.stdout
    ok = cli("validate", str(root / ".claude/workflows/good.js"), str(lone), "--json", cwd=root)
    doc = json.loads(ok.stdout)
    assert ok.returncode == 0 and doc["valid"] is True and len(doc["files"]) == 2
    missing = cli("validate", str(lone), "nope.js", cwd=root)
    assert missing.returncode == 2 and "nope.js" in missing.stderr
    no_traceback(missing)


def test_delete_with_yes_removes_a_draft_and_describe_json_has_the_metadata(tmp_path: Path) -> None:
    root = _project(tmp_path)
    src = write(root / "d.js", DEPLOY)
    cli("library", "create", str(src), "--tags", "a", "--category", "ops", "--author", "ana", cwd=root)
    doc = json.loads(cli("library", "describe", "deploy", "--json", cwd=root).stdout)
    assert (doc["version"], doc["tags"], doc["category"], doc["author"], doc["source"]) == (
        "1.0.0", ["a"], "ops", "ana", DEPLOY,
    )  # fmt: skip
    cli("library", "create", str(src), "--draft", cwd=root)
    gone = cli("library", "delete", "deploy", "--draft", "--yes", cwd=root)
    assert gone.returncode == 0 and "deleted the draft" not in gone.stderr and "deleted deploy" in gone.stdout
    assert (root / ".claude/workflows/deploy.js").exists()  # only the draft went
    missing = cli("library", "describe", "deploy", "--draft", cwd=root)
    assert missing.returncode == 1 and "[not_found]" in missing.stderr


def test_the_commands_printed_for_a_name_with_spaces_and_quotes_run_as_printed(tmp_path: Path) -> None:
    root = _project(tmp_path)
    name = "Greet Mé's $HOME"
    source = f"export const meta = {{ name: {json.dumps(name)}, description: 'Say hello' }}\nreturn await agent('hi')\n"
    src = write(root / "greet.src.js", source)

    drafted = cli("library", "create", str(src), "--draft", cwd=root)
    assert drafted.returncode == 0, drafted.stderr
    printed = drafted.stdout.strip().split("; run it with: ", 1)[1]
    argv = shlex.split(printed)
    assert argv == ["workflow-mcp", "run", f"{name}@draft"]
    ran = cli(*argv[1:], "--provider", "fake", "--events", "none", cwd=root)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == "hi"

    assert cli("library", "create", str(src), cwd=root).returncode == 0
    asked = cli("library", "delete", name, cwd=root)  # stdin is not a terminal: the command to confirm
    printed = asked.stdout.strip().splitlines()[-1].removeprefix("to delete it, run: ")
    argv = shlex.split(printed)
    assert argv[:4] == ["workflow-mcp", "library", "delete", name] and argv[4] == "--confirm"
    deleted = cli(*argv[1:], cwd=root)
    assert deleted.returncode == 0, deleted.stderr
    assert not list((root / ".claude" / "workflows").glob("*.js"))


def test_an_invalid_source_is_reported_at_the_file_and_line_given_or_at_stdin(tmp_path: Path) -> None:
    root = _project(tmp_path)
    bad = write(root / "bad.js", "export const meta = { name: 'bad' }\nreturn 1\n")

    from_file = cli("library", "create", str(bad), cwd=root)
    from_stdin = subprocess.run(
        [CLI, "library", "create", "-", "--draft"], input=bad.read_text(), cwd=root,
        env={**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    rule = "[meta-description]"
    for done, where in ((from_file, str(bad)), (from_stdin, "<stdin>")):
        assert done.returncode == 1
        headline, error = done.stderr.splitlines()
        assert (
            headline
            == f"workflow-mcp: {where}: the source breaks 1 loading rule(s); nothing was written [invalid_source]"
        )
        assert error.startswith(f"{where}:1:21: error: meta.description is missing") and error.endswith(rule)


def test_refusals_name_the_library_commands_that_help_not_the_mcp_tools(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    hand = write(root / ".claude" / "workflows" / "deploy.js", DEPLOY)  # written by hand: no library entry

    said = {
        "describe": cli("library", "describe", "nothing", cwd=root),
        "delete": cli("library", "delete", "nothing", cwd=root),
        "confirm": cli("library", "delete", "deploy", "--confirm", "not-a-token", cwd=root),
        "create over a hand-written file": cli("library", "create", str(hand), cwd=root),
        "list nothing": cli("library", "list", "--drafts", cwd=_project(tmp_path / "empty")),
    }

    for what, done in said.items():
        assert "workflow_" not in done.stderr, what
        no_traceback(done)
    assert "`workflow-mcp library list` shows what exists [not_found]" in said["describe"].stderr
    assert "`workflow-mcp library list` shows what exists [not_found]" in said["delete"].stderr
    assert "without --confirm for a new token [confirmation_invalid]" in said["confirm"].stderr
    assert (
        "delete it with `workflow-mcp library delete NAME` first [already_exists]"
        in said["create over a hand-written file"].stderr
    )
    assert said["list nothing"].stderr == (
        "workflow-mcp: no workflows yet; create one with `workflow-mcp library create FILE`\n"
    )
