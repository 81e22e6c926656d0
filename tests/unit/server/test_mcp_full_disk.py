"""The MCP server over a SQLite store whose disk fills up mid-run (a real tiny tmpfs): the run ends
with an error naming the disk, the server keeps answering (status, events, listing),
everything committed before stays readable, and once space is back a resume finishes the run and a new
run completes. The SDK's in-memory ``Client(server)`` over the real service."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.service import WorkflowService
from workflow_mcp.store.sqlite import SqliteStore

from mcp_kit import Env, all_events, call, connect, data, text
from store_faults import fill_disk, tiny_tmpfs

pytestmark = pytest.mark.anyio

BIG = """export const meta = { name: 'big', description: 'agent results of 50 KB each' }
const out = []
for (let i = 0; i < 40; i++) out.push((await agent('p'.repeat(50000) + i)).length)
return out
"""
SMALL = "export const meta = { name: 'small', description: 'one call' }\nreturn await agent('hi')\n"


async def test_a_full_disk_ends_the_run_naming_it_and_the_server_keeps_serving(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "state", "8m") as home:
        project = tmp_path / "project"
        (project / ".git").mkdir(parents=True)
        (tmp_path / "home").mkdir()
        service = WorkflowService(
            SqliteStore(home / "state.db"), cwd=str(project), home=str(tmp_path / "home")
        )
        env = Env(root=tmp_path, project=project, home=tmp_path / "home", service=service)
        env.workflow("big", BIG)
        env.workflow("small", SMALL)
        try:
            async with connect(env.trusted_server()) as c:
                done = data(
                    await call(c, "workflow_run", {"name": "small", "provider": "fake", "waitMs": 20_000})
                )
                assert done["status"] == "completed"
                filler = fill_disk(home, leave=400 * 1024)
                failed = data(
                    await call(c, "workflow_run", {"name": "big", "provider": "fake", "waitMs": 20_000})
                )
                run_id = failed["runId"]
                assert (
                    failed["status"] == "failed"
                    and f"the disk is full (0 bytes free at {home})" in failed["error"]["message"]
                )
                status = data(await call(c, "workflow_run_status", {"runId": run_id}))
                assert status["status"] == "failed" and status["error"] == failed["error"]
                # The server still answers everything that only reads.
                kept = data(await call(c, "workflow_run_status", {"runId": done["runId"]}))
                assert kept["status"] == "completed" and done["result"] == "hi"
                assert [e["type"] for e in await all_events(c, done["runId"])][-1] == "run.completed"
                assert {w["name"] for w in data(await call(c, "workflow_list", {}))["workflows"]} == {
                    "big",
                    "small",
                }
                filler.unlink()
                filler = fill_disk(home)  # not a byte left: another big run cannot be stored
                again = await call(c, "workflow_run", {"name": "big", "provider": "fake", "waitMs": 20_000})
                why = text(again) if again.is_error else data(again)["error"]["message"]
                assert f"the disk is full (0 bytes free at {home})" in why, why
                assert (
                    data(await call(c, "workflow_run_status", {"runId": done["runId"]}))["status"]
                    == "completed"
                )
                filler.unlink()  # space is back
                resumed = data(
                    await call(
                        c, "workflow_run", {"resumeFromRunId": run_id, "provider": "fake", "waitMs": 20_000}
                    )
                )
                assert resumed["status"] == "completed" and resumed["result"] == [
                    50000 + len(str(i)) for i in range(40)
                ]
                fresh = data(
                    await call(c, "workflow_run", {"name": "small", "provider": "fake", "waitMs": 20_000})
                )
                assert fresh["status"] == "completed"
        finally:
            await service.shutdown("the test ended", timeout_s=10)
            service.store.close()
