"""The golden Claude Code runs in ``tests/fixtures/claude`` (see its README), as test inputs.

Each case folder holds the workflow (``workflow.js``, or ``v1.js``/``v2.js`` for a run resumed inside
Claude), the oracle's ``case.json`` (fake model script, args, extra project files), the oracle's
output and ``session/``: the files Claude Code wrote for the run, in Claude's own layout.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from workflow_mcp.engine.run import MISSING

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"


@dataclass(frozen=True)
class ClaudeCase:
    name: str

    @property
    def dir(self) -> Path:
        return FIXTURES / self.name

    @cached_property
    def case(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.dir / "case.json").read_text(encoding="utf-8"))
        return data

    @property
    def resumed_in_claude(self) -> bool:
        return self.case.get("oracleMode") == "resume"

    @property
    def script(self) -> Path:
        """The script of the run's last attempt (the one Claude saved)."""
        return self.dir / ("v2.js" if self.resumed_in_claude else "workflow.js")

    @property
    def profile(self) -> str:
        return "claude-code/" + str(self.case.get("oracleVersion", "2.1.332"))

    @property
    def fake(self) -> dict[str, Any]:
        fake: dict[str, Any] = self.case.get("fake") or self.case.get("fake1") or {}
        return fake

    @property
    def args(self) -> Any:
        return self.case.get("args", MISSING)

    @cached_property
    def oracle(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.dir / "oracle-output.json").read_text(encoding="utf-8"))
        return data

    @property
    def claude_result(self) -> Any:
        """The workflow result Claude reported for the run's last attempt."""
        return self.oracle["run2"]["result"] if self.resumed_in_claude else self.oracle["result"]

    @property
    def session(self) -> Path:
        return self.dir / "session"

    @property
    def record_path(self) -> Path:
        (record,) = (self.session / "workflows").glob("wf_*.json")
        return record

    @property
    def run_id(self) -> str:
        return self.record_path.stem

    @property
    def journal_path(self) -> Path:
        return self.session / "subagents" / "workflows" / self.run_id / "journal.jsonl"

    def journal(self) -> list[dict[str, Any]]:
        lines = self.journal_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def script_sha256(self) -> str:
        return hashlib.sha256(self.script.read_bytes()).hexdigest()

    def project(self, root: Path) -> Path:
        """A project folder under ``root`` holding the case's extra files (e.g. child workflows)."""
        proj = root / "proj"
        (proj / ".claude" / "workflows").mkdir(parents=True, exist_ok=True)
        for rel, content in (self.case.get("files") or {}).items():
            target = proj / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        return proj

    def copy_session(self, root: Path) -> Path:
        """A private copy of ``session/`` under ``root`` (for tests that damage or watch the files)."""
        dest = root / "session"
        shutil.copytree(self.session, dest)
        return dest


def case_names(*, resumed_in_claude: bool | None = None) -> list[str]:
    names = sorted(p.parent.name for p in FIXTURES.glob("*/case.json"))
    if resumed_in_claude is None:
        return names
    return [n for n in names if ClaudeCase(n).resumed_in_claude == resumed_in_claude]


def git_repo(path: Path) -> Path:
    """Make ``path`` a git repository with one commit, like the oracle's project (worktree calls
    need one)."""
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        for argv in (
            ["init", "-q"],
            [
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "init",
            ],
        ):
            subprocess.run(["git", *argv], cwd=path, check=True, capture_output=True)
    return path
