"""WorkflowService idempotency keys over a real SQLite file: the same run for the same parameters,
a refusal naming the run for other ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp import FakeProvider, SqliteStore, WorkflowService, load_workflow
from workflow_mcp.errors import IdempotencyKeyReusedError

pytestmark = pytest.mark.anyio

SOURCE = "export const meta = { name: 'echo', description: 'd' }\nreturn args\n"


async def test_a_key_returns_its_live_run_for_the_same_parameters_and_refuses_others(tmp_path: Path) -> None:
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))
    wf = load_workflow(source=SOURCE)
    first = service.start_run(wf, provider=FakeProvider(), args={"n": 1}, idempotency_key="k")
    assert service.start_run(wf, provider=FakeProvider(), args={"n": 1}, idempotency_key="k") is first
    with pytest.raises(IdempotencyKeyReusedError, match=f"used for run {first.run_id} with different"):
        service.start_run(wf, provider=FakeProvider(), args={"n": 2}, idempotency_key="k")
    other = load_workflow(source=SOURCE.replace("return args", "return 0"))
    with pytest.raises(IdempotencyKeyReusedError):
        service.start_run(other, provider=FakeProvider(), args={"n": 1}, idempotency_key="k")
    assert await first.result() == {"n": 1}
    assert service.find_idempotent_run("k") == first.run_id
    assert [r.run_id for r in service.list_runs()] == [first.run_id]
    await service.shutdown()
