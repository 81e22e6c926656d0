"""The runs page: newest first, filtered by status and by workflow, paginated; a status that does not
exist is a 400 naming the page, not an error. The viewer app over a real service and SQLite file,
behind the same guard as over HTTP."""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path

import httpx2
import pytest

import workflow_mcp.server.viewer._app as viewer_app_module
from workflow_mcp import FakeProvider, SqliteStore, WorkflowService, load_workflow
from workflow_mcp.errors import RunFailedError
from workflow_mcp.server.http import HttpGuard, TokenSet, with_viewer
from workflow_mcp.server.viewer import LocalControl, viewer_app

pytestmark = pytest.mark.anyio

TOKEN = "kq3JrV9tXbW2mZ8yLc5NdF7hG1pS4aE6uR0oIiTjYwB"


def source(name: str, body: str = "return await agent('x')") -> str:
    return f"export const meta = {{ name: '{name}', description: 'd' }}\n{body}\n"


async def test_runs_are_listed_newest_first_filtered_and_paginated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))
    ids = []
    for name, body in [("alpha", "return 1"), ("beta", "throw new Error('no')"), ("alpha", "return 2")]:
        handle = service.start_run(load_workflow(source=source(name, body)), provider=FakeProvider())
        with contextlib.suppress(RunFailedError):
            await handle.result()
        ids.append(handle.run_id)
    monkeypatch.setattr(viewer_app_module, "PAGE_SIZE", 2)
    tokens = TokenSet({hashlib.sha256(TOKEN.encode()).hexdigest(): "local"}, "test", local=True)

    async def nothing(scope: object, receive: object, send: object) -> None:
        raise AssertionError("only the viewer is asked")

    guard = HttpGuard(
        with_viewer(nothing, viewer_app(service, LocalControl(service))),
        tokens,
        host="127.0.0.1",
        port=8766,
        viewer_base="/ui",
    )
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=guard),
        base_url="http://127.0.0.1:8766",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as h:

        def listed(text: str) -> list[str]:
            return re.findall(r'<a href="/ui/runs/(run_\w+)">', text)

        first = await h.get("/ui/")
        assert first.status_code == 200 and listed(first.text) == [ids[2], ids[1]]
        assert 'rel="next"' in first.text and "page=2" in first.text
        second = await h.get("/ui/?page=2")
        assert (
            listed(second.text) == [ids[0]]
            and 'rel="prev"' in second.text
            and 'rel="next"' not in second.text
        )
        failed = await h.get("/ui/?status=failed")
        assert listed(failed.text) == [ids[1]] and "status-failed" in failed.text
        alpha = await h.get("/ui/", params={"workflow": "alpha"})
        assert listed(alpha.text) == [ids[2], ids[0]]
        both = await h.get("/ui/", params={"workflow": "alpha", "status": "completed"})
        assert listed(both.text) == [ids[2], ids[0]]
        bad = await h.get("/ui/?status=finished")
        assert bad.status_code == 400 and listed(bad.text) == []
        assert (await h.get("/ui/?page=x")).status_code == 200  # an unreadable page number is page 1
        row = re.search(rf"{ids[1]}</a></td>(.*?)</tr>", failed.text)
        assert row is not None and "beta" in row[1] and "fake" in row[1] and "0/0" in row[1]
    await service.shutdown()


async def test_a_price_table_that_does_not_read_shows_no_cost_and_says_why_on_both_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(tmp_path))
    service = WorkflowService(SqliteStore(tmp_path / "state.db"), cwd=str(tmp_path))
    provider = FakeProvider({"default": {"text": "x", "tokens": {"input": 1000, "output": 10}}})
    handle = service.start_run(load_workflow(source=source("priced")), provider=provider)
    await handle.result()
    tokens = TokenSet({hashlib.sha256(TOKEN.encode()).hexdigest(): "local"}, "test", local=True)

    async def nothing(scope: object, receive: object, send: object) -> None:
        raise AssertionError("only the viewer is asked")

    guard = HttpGuard(
        with_viewer(nothing, viewer_app(service, LocalControl(service))),
        tokens,
        host="127.0.0.1",
        port=8766,
        viewer_base="/ui",
    )
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=guard),
        base_url="http://127.0.0.1:8766",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as h:
        (tmp_path / "prices.toml").write_text('[fake."*"]\ninput = 2000\noutput = 100000\n')
        runs = (await h.get("/ui/")).text
        assert re.search(rf"{handle.run_id}</a></td>.*<td>3.0000 USD</td></tr>", runs)  # 2 + 1
        view = (await h.get(f"/ui/api/runs/{handle.run_id}")).json()
        assert view["cost"] == 3.0 and view["pricesProblem"] is None and view["agents"][0]["cost"] == 3.0

        (tmp_path / "prices.toml").write_text('[fake."*"]\ninput = "cheap"\n')
        runs = (await h.get("/ui/")).text
        assert 'id="prices-problem"' in runs and "fake.*.input: must be a non-negative number" not in runs
        assert 'fake."*".input: must be a non-negative number' in runs.replace("&quot;", '"')
        assert re.search(rf"{handle.run_id}</a></td>.*<td>—</td></tr>", runs)
        page = (await h.get(f"/ui/runs/{handle.run_id}")).text
        assert '<dd id="cost">—</dd>' in page and 'id="prices-problem"' in page
