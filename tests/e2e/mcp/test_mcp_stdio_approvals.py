"""Pre-approval for unattended use, over real stdio: a client that cannot ask the user (no elicitation,
or one that answers ``cancel``/``decline`` on its own) runs what ``workflow-mcp approvals add``
approved, or any inline script with ``serve --allow-inline-scripts``; a refusal says what came back
and names the command that pre-approves the source."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ElicitResult

from mcp_kit import BOUND_S, call, connect, data, text
from mcp_serve_kit import CLI, Site

pytestmark = pytest.mark.anyio

SCRIPT = """export const meta = { name: 'inline-one', description: 'one agent call' }
return await agent('inline hello', { label: 'only' })
"""
RUN = {"script": SCRIPT, "provider": "fake", "waitMs": 20_000}
SHA = hashlib.sha256(SCRIPT.encode()).hexdigest()


def approvals(site: Site, *args: str) -> subprocess.CompletedProcess[str]:
    """``workflow-mcp approvals ARGS`` as a subprocess against the site's state directory."""
    return subprocess.run(
        [CLI, "approvals", *args],
        env=site.env(),
        cwd=str(site.project),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )


async def test_an_inline_script_runs_without_elicitation_once_approvals_add_approved_its_hash(
    site: Site,
) -> None:
    async with connect(site.stdio()) as c:
        refused = await call(c, "workflow_run", RUN)
        assert refused.is_error and f"workflow-mcp approvals add --sha256 {SHA}" in text(refused)
        added = approvals(site, "add", "--sha256", SHA)
        assert added.returncode == 0, added.stderr
        # The running server reads the changed file on its next check: no restart.
        out = data(await call(c, "workflow_run", RUN))
    assert out["status"] == "completed" and out["result"] == "inline hello"
    listed = json.loads(approvals(site, "list", "--json").stdout)["approvals"]
    assert [(a["sourceHash"], a["by"]) for a in listed] == [(SHA, None)]


async def test_a_workflow_file_approved_by_the_cli_runs_and_stops_running_once_revoked(
    site: Site, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere" / "outside.js"  # not under the server's --trust directory
    elsewhere.parent.mkdir()
    elsewhere.write_text(SCRIPT.replace("inline-one", "outside"))
    run = {"path": str(elsewhere), "provider": "fake", "waitMs": 20_000}
    async with connect(site.stdio()) as c:
        refused = await call(c, "workflow_run", run)
        assert refused.is_error and f"workflow-mcp approvals add {elsewhere}" in text(refused)
        assert approvals(site, "add", str(elsewhere)).returncode == 0
        assert data(await call(c, "workflow_run", run))["status"] == "completed"
        revoked = approvals(site, "revoke", str(elsewhere))
        assert revoked.returncode == 0, revoked.stderr
        again = await call(c, "workflow_run", run)
    assert again.is_error and "never been approved" in text(again)
    assert approvals(site, "revoke", str(elsewhere)).returncode == 1


async def test_serve_allow_inline_scripts_runs_an_inline_script_without_any_approval(site: Site) -> None:
    async with connect(site.stdio("--allow-inline-scripts")) as c:
        out = data(await call(c, "workflow_run", RUN))
    assert out["status"] == "completed" and out["result"] == "inline hello"
    assert json.loads(approvals(site, "list", "--json").stdout) == {"approvals": []}


@pytest.mark.parametrize("action", ["cancel", "decline"])
async def test_an_approval_answered_cancel_or_decline_is_reported_as_exactly_that(
    site: Site, action: str
) -> None:
    async def answer(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action=action)  # type: ignore[arg-type]

    async with connect(site.stdio(), elicitation_callback=answer) as c:
        refused = await call(c, "workflow_run", RUN)
    message = text(refused)
    assert refused.is_error and f"the client answered `{action}`" in message
    assert "did not approve" not in message
    assert f"workflow-mcp approvals add --sha256 {SHA}" in message and "--allow-inline-scripts" in message
    runs = subprocess.run(
        [CLI, "runs", "list", "--json"],
        env=site.env(),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=True,
    )
    assert json.loads(runs.stdout) == {"runs": []}


def test_allow_inline_scripts_is_refused_over_http(site: Site) -> None:
    out = subprocess.run(
        [CLI, "serve", "--http", "--allow-inline-scripts"],
        env=site.env(),
        cwd=str(site.project),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )
    assert out.returncode == 2 and "--allow-inline-scripts is for a stdio server" in out.stderr
