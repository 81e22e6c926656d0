"""The workflow library over real Streamable HTTP with two bearer tokens: a draft is approved for the
client that created it only, and the personal directory is out of every HTTP client's reach."""

from __future__ import annotations

import anyio
import pytest

from mcp_kit import BOUND_S, call, data, text
from mcp_serve_kit import ALICE, BOB, Site, http_client, http_server

pytestmark = pytest.mark.anyio

DRAFT = "export const meta = { name: 'plan', description: 'a draft plan' }\nreturn await agent('plan it')\n"


async def test_a_draft_runs_for_the_client_that_created_it_and_no_other(site: Site) -> None:
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,  # neither client can be asked (no elicitation)
    ):
        with anyio.fail_after(BOUND_S):
            made = data(await call(alice, "workflow_create_draft", {"script": DRAFT}))
            ran = data(
                await call(
                    alice, "workflow_run", {"name": made["runAs"], "provider": "fake", "waitMs": 20000}
                )
            )
            refused = await call(bob, "workflow_run", {"name": "plan@draft", "provider": "fake", "waitMs": 0})
            personal = await call(bob, "workflow_create", {"script": DRAFT, "personal": True})
    assert ran["status"] == "completed"
    assert refused.is_error and "approv" in text(refused).lower()
    assert personal.is_error and data(personal)["reason"] == "invalid_input"
    assert not (site.home / ".claude" / "workflows").exists()


async def test_a_delete_confirmation_confirms_only_for_the_client_it_was_given_to(site: Site) -> None:
    source = "export const meta = { name: 'keep', description: 'kept' }\nreturn 1\n"
    async with (
        http_server(site) as server,
        http_client(server.url, ALICE) as alice,
        http_client(server.url, BOB) as bob,
    ):
        with anyio.fail_after(BOUND_S):
            assert data(await call(alice, "workflow_create", {"script": source}))["name"] == "keep"
            asked = data(await call(alice, "workflow_delete", {"name": "keep"}))
            assert asked["status"] == "confirmation_required"
            token = asked["confirmToken"]
            # Another client that learns the token (a shared log, a transcript) cannot answer it …
            replayed = await call(bob, "workflow_delete", {"name": "keep", "confirmToken": token})
            assert replayed.is_error and data(replayed)["reason"] == "confirmation_invalid"
            assert (site.project / ".claude" / "workflows" / "keep.js").exists()
            # … and its attempt does not use the token up: the client it was given to still can.
            done = data(await call(alice, "workflow_delete", {"name": "keep", "confirmToken": token}))
            assert done["status"] == "deleted"
    assert not (site.project / ".claude" / "workflows" / "keep.js").exists()


async def test_a_link_in_the_workflows_directory_to_a_file_outside_the_roots_is_out_of_reach(
    site: Site,
) -> None:
    # Anything that can write the project (an agent with workspace-write) can plant a link; the library
    # read it like any file, so workflow_get showed a personal workflow over HTTP.
    import os

    personal = site.home / ".claude" / "workflows"
    personal.mkdir(parents=True)
    (personal / "private.js").write_text(
        "export const meta = { name: 'private', description: 'mine' }\nreturn 'the personal secret'\n"
    )
    os.symlink(personal / "private.js", site.project / ".claude" / "workflows" / "private.js")
    async with http_server(site) as server, http_client(server.url, BOB) as bob:
        with anyio.fail_after(BOUND_S):
            got = await call(bob, "workflow_get", {"name": "private"})
            assert got.is_error and data(got)["reason"] == "not_found", text(got)
            asked = await call(bob, "workflow_delete", {"name": "private"})
            assert asked.is_error and data(asked)["reason"] == "not_found", text(asked)
            for answer in (got, asked):
                assert "the personal secret" not in text(answer) + str(answer.structured_content)
    assert (personal / "private.js").exists()


async def test_project_instructions_that_link_outside_the_roots_are_not_shown(site: Site) -> None:
    import os

    secret = site.home / "notes.md"
    secret.write_text("the home secret")
    (site.project / ".workflow-mcp").mkdir()
    os.symlink(secret, site.project / ".workflow-mcp" / "instructions.md")
    async with http_server(site) as server, http_client(server.url, BOB) as bob:
        with anyio.fail_after(BOUND_S):
            got = await call(bob, "workflow_get", {"name": "hello"})
            assert not got.is_error and data(got)["globalInstructions"] is None
            assert "the home secret" not in text(got)
            os.unlink(site.project / ".workflow-mcp" / "instructions.md")  # the folder linked instead
            os.rmdir(site.project / ".workflow-mcp")
            (site.home / "elsewhere").mkdir()
            (site.home / "elsewhere" / "instructions.md").write_text("the home secret")
            os.symlink(site.home / "elsewhere", site.project / ".workflow-mcp")
            assert data(await call(bob, "workflow_get", {"name": "hello"}))["globalInstructions"] is None
            os.unlink(site.project / ".workflow-mcp")
            (site.project / ".workflow-mcp").mkdir()
            (site.project / ".workflow-mcp" / "instructions.md").write_text("use the fake provider")
            assert data(await call(bob, "workflow_get", {"name": "hello"}))["globalInstructions"] == (
                "use the fake provider"
            )
