"""The workflow library through a real ``workflow-mcp serve`` over stdio and the ``mcp`` SDK client with
an elicitation callback: create → list (by tag) → describe → run → delete with elicitation, on the
current protocol (input-required rounds) and the legacy one (elicitation sent mid-call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.types import ElicitResult

from workflow_mcp.definitions.load import load_workflow

from mcp_kit import call, connect, data, text
from mcp_serve_kit import Site

pytestmark = pytest.mark.anyio

REVIEW = """export const meta = { name: 'review', description: 'Review the change', phases: [{ title: 'Read' }] }
phase('Read')
const notes = await agent('read the diff', { label: 'read' })
return { notes }
"""


def confirming(answer: bool, before: Any = None) -> Any:
    async def callback(context: Any, params: Any) -> ElicitResult:
        callback.asked.append(params.message)  # type: ignore[attr-defined]
        if before is not None:
            before()
        return ElicitResult(action="accept", content={"confirm": answer})

    callback.asked = []  # type: ignore[attr-defined]
    return callback


@pytest.mark.parametrize("mode", ["current", "legacy"])
async def test_create_list_describe_run_and_delete_with_elicitation_over_stdio(site: Site, mode: str) -> None:
    yes = confirming(True)
    kwargs: dict[str, Any] = {"elicitation_callback": yes}
    if mode == "legacy":
        kwargs["mode"] = "legacy"
    file = site.project / ".claude/workflows/review.js"
    async with connect(site.stdio(), **kwargs) as c:
        created = data(
            await call(c, "workflow_create", {"script": REVIEW, "version": "1.2.0", "tags": ["code", "ci"]})
        )
        assert created["file"] == ".claude/workflows/review.js"
        assert file.read_text() == REVIEW
        assert load_workflow(file).meta.name == "review"  # Claude's profile accepts the file as written
        tagged = data(await call(c, "workflow_list", {"tags": ["CI"]}))
        assert [(w["name"], w["version"]) for w in tagged["workflows"]] == [("review", "1.2.0")]
        assert data(await call(c, "workflow_list", {"tags": ["ci", "other"]}))["workflows"] == []
        described = data(await call(c, "workflow_describe", {"name": "review"}))
        assert described["sidecar"]["tags"] == ["code", "ci"] and described["approved"] is True
        got = data(await call(c, "workflow_get", {"name": "review"}))
        assert got["source"] == REVIEW and got["globalInstructions"] is None
        ran = data(await call(c, "workflow_run", {"name": "review", "provider": "fake", "waitMs": 20000}))
        assert ran["status"] == "completed" and "notes" in ran["result"]
        deleted = await call(c, "workflow_delete", {"name": "review"})
        assert data(deleted)["status"] == "deleted", text(deleted)
        assert "review@1.2.0" in yes.asked[0] and ".claude/workflows/review.js" in yes.asked[0]
        assert not file.exists()
        assert [w["name"] for w in data(await call(c, "workflow_list", {}))["workflows"]] == [
            "hello",
            "steps",
        ]


async def test_a_file_edited_while_the_user_is_asked_is_target_changed_on_the_legacy_protocol(
    site: Site,
) -> None:
    file = site.project / ".claude/workflows/review.js"

    def edit() -> None:
        file.write_text(REVIEW.replace("Review the change", "Edited meanwhile"))

    yes = confirming(True, before=edit)
    async with connect(site.stdio(), mode="legacy", elicitation_callback=yes) as c:
        await call(c, "workflow_create", {"script": REVIEW})
        refused = await call(c, "workflow_delete", {"name": "review"})
    assert refused.is_error and data(refused)["reason"] == "target_changed", text(refused)
    assert "Edited meanwhile" in file.read_text()
    assert len(yes.asked) == 1


async def test_global_instructions_come_from_the_configured_markdown(site: Site, tmp_path: Path) -> None:
    (site.state).mkdir(parents=True, exist_ok=True)
    (site.state / "instructions.md").write_text("Always run with the fake provider first.\n")
    async with connect(site.stdio()) as c:
        await call(c, "workflow_create", {"script": REVIEW})
        got = data(await call(c, "workflow_get", {"name": "review"}))
    assert got["globalInstructions"] == "Always run with the fake provider first.\n"
