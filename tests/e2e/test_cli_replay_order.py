"""``workflow-mcp resume`` of a real Claude Code run whose result depends on the order its calls
completed: every call replays (no provider call) and the result is Claude's, byte for byte. The run was recorded with the shared oracle (tests/fixtures/claude/pipeline-barrier-free)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_cli import cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "claude" / "pipeline-barrier-free"


def test_a_claude_run_whose_trace_depends_on_completion_order_replays_with_claudes_result(
    tmp_path: Path,
) -> None:
    session = shutil.copytree(FIXTURE / "session", tmp_path / "session")
    (record,) = (session / "workflows").glob("wf_*.json")
    claude = json.loads((FIXTURE / "oracle-output.json").read_text())["result"]
    assert claude["trace"] == ["a1", "a2", "a3", "b1", "b2", "b3"]  # a, then b: not the order asked

    p = cli("resume", str(record), "--provider", "fake", "--events", "jsonl", cwd=tmp_path)

    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == claude
    kinds = [json.loads(line)["type"] for line in p.stderr.splitlines()]
    assert kinds.count("agent.cached") == 4 and "agent.started" not in kinds
