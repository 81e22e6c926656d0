"""Human checkpoints through the CLI: with ``approvals = "ask"`` in the user
policy and the real ACP stub agent asking to run a command, ``workflow-mcp run`` without a terminal
pauses with ``checkpoint_required`` and names the command that answers it;
``workflow-mcp resume RUN --checkpoint-reply ID=allow`` lets the command run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).with_name("workflow-mcp"))
STUB_AGENT = str(Path(__file__).resolve().parents[1] / "integration" / "providers" / "acp_stub_agent.py")

pytest.importorskip("acp", reason="the acp extra is not installed (pip install -e '.[test,acp]')")


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKFLOW_MCP_HOME": str(cwd / "state"), "HOME": str(cwd / "home")}
    # No terminal on stdin: nobody can be asked at a prompt, so a checkpoint pauses the run.
    return subprocess.run(
        [CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def setup(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "config.toml").write_text(
        'default = "acp"\n\n[policy]\napprovals = "ask"\n\n'
        f"[providers.acp]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(STUB_AGENT)}]\n"
    )
    wf = tmp_path / "gated.js"
    wf.write_text(
        "export const meta = { name: 'gated', description: 'an agent that runs a command' }\n"
        "return await agent('run touch ran.txt', { label: 'runner' })\n"
    )
    return wf


def test_a_paused_checkpoint_is_answered_with_resume_checkpoint_reply(tmp_path: Path) -> None:
    wf = setup(tmp_path)
    first = cli("run", str(wf), "--provider", "acp", "--events", "jsonl", cwd=tmp_path)
    assert first.returncode == 1, first.stderr
    events = [json.loads(line) for line in first.stderr.splitlines() if line.startswith("{")]
    (paused,) = [e for e in events if e["type"] == "run.paused"]
    context = paused["payload"]["checkpointContext"]
    assert paused["payload"]["reason"] == "checkpoint_required" and context["command"] == "touch ran.txt"
    run_id, cid = paused["runId"], context["checkpointId"]
    assert f"workflow-mcp resume {run_id} --checkpoint-reply {cid}=allow" in first.stderr
    assert not (tmp_path / "ran.txt").exists()
    shown = cli("runs", "show", run_id, cwd=tmp_path).stdout.splitlines()
    assert shown[-2:] == [
        f"  paused: checkpoint_required: runner asks permission to {context['tool']} touch ran.txt",
        f"  answer it with: workflow-mcp resume {run_id} --checkpoint-reply {cid}=allow (or =deny)",
    ]

    done = cli("resume", run_id, "--checkpoint-reply", f"{cid}=allow", "--events", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "allow_once"
    assert (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize("reply", ["cp_1", "cp_1=maybe", "cp_1="])
def test_a_malformed_checkpoint_reply_exits_2_before_anything_runs(tmp_path: Path, reply: str) -> None:
    setup(tmp_path)
    p = cli("resume", "run_missing", "--checkpoint-reply", reply, cwd=tmp_path)
    assert p.returncode == 2 and "ID=allow or ID=deny" in p.stderr
    assert "Traceback" not in p.stderr
