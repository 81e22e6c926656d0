"""The library tools over the real SDK client (in memory): create, list filters from the sidecar, get,
drafts run as <name>@draft and approved for their author only, delete by elicitation or by token, and
typed reasons in every failure's structuredContent."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from mcp.types import ElicitResult

from workflow_mcp.errors import LIBRARY_REASONS
from workflow_mcp.server import Principal

from mcp_kit import Env, call, connect, data, text

pytestmark = pytest.mark.anyio

DEPLOY = "export const meta = { name: 'deploy', description: 'Ship the app' }\nreturn await agent('ship', { label: 'ship' })\n"
AUDIT = "export const meta = { name: 'audit', description: 'Check deps' }\nreturn 1\n"


def answering(**content: Any) -> Any:
    async def callback(context: Any, params: Any) -> ElicitResult:
        callback.asked.append(params.message)  # type: ignore[attr-defined]
        if not content:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=content)

    callback.asked = []  # type: ignore[attr-defined]
    return callback


FAILURE = {
    "type": "object",
    "required": ["reason", "message", "errors"],
    "additionalProperties": False,
    "properties": {
        "reason": {"enum": list(LIBRARY_REASONS)},
        "message": {"type": "string"},
        "errors": {"type": "array"},
    },
}


def reason(result: Any) -> str:
    """The typed reason of a failed library call (its structuredContent checked against the shape)."""
    assert result.is_error, text(result)
    jsonschema.Draft202012Validator(FAILURE).validate(data(result))
    assert "/" not in data(result)["message"] or data(result)["reason"] != "write_failed"
    return str(data(result)["reason"])


async def test_create_list_by_tag_get_and_a_new_version(env: Env) -> None:
    async with connect(env.server()) as c:
        created = data(
            await call(
                c,
                "workflow_create",
                {"script": DEPLOY, "version": "v1.0.0+b.1", "tags": ["ops"], "category": "release"},
            )
        )
        assert created == {
            "status": "created", "name": "deploy", "version": "1.0.0", "scope": "project",
            "file": ".claude/workflows/deploy.js", "sourceHash": created["sourceHash"], "tags": ["ops"],
            "category": "release",
        }  # fmt: skip
        assert (env.project / ".claude/workflows/deploy.js").read_text() == DEPLOY
        await call(c, "workflow_create", {"script": AUDIT, "tags": ["security"]})
        listed = data(await call(c, "workflow_list", {"tags": [" OPS "]}))
        assert [(w["name"], w["version"], w["tags"]) for w in listed["workflows"]] == [
            ("deploy", "1.0.0", ["ops"])
        ]
        by_category = data(await call(c, "workflow_list", {"category": "RELEASE"}))
        assert [w["name"] for w in by_category["workflows"]] == ["deploy"]
        got = data(await call(c, "workflow_get", {"name": "deploy"}))
        assert (got["source"], got["version"], got["current"], got["globalInstructions"]) == (
            DEPLOY,
            "1.0.0",
            True,
            None,
        )
        again = await call(c, "workflow_create", {"script": DEPLOY.replace("Ship", "Ship again")})
        assert reason(again) == "already_exists"
        bumped = data(
            await call(
                c, "workflow_create", {"script": DEPLOY.replace("Ship", "Ship again"), "version": "1.1.0"}
            )
        )
        assert bumped["previousVersion"] == "1.0.0"
        old = data(await call(c, "workflow_get", {"name": "deploy", "version": "1.0.0"}))
        assert old["source"] == DEPLOY and old["current"] is False and old["versions"] == ["1.1.0", "1.0.0"]
        described = data(await call(c, "workflow_describe", {"name": "deploy"}))
        assert described["sidecar"]["version"] == "1.1.0"
        await call(
            c, "workflow_create", {"script": DEPLOY.replace("Ship", "Ship rc"), "version": "2.0.0-rc.1"}
        )
        await call(c, "workflow_create", {"script": DEPLOY.replace("Ship", "Ship 2"), "version": "2.0.0"})
        row = next(w for w in data(await call(c, "workflow_list", {}))["workflows"] if w["name"] == "deploy")
        assert (row["version"], row["versions"]) == ("2.0.0", ["2.0.0", "2.0.0-rc.1", "1.1.0", "1.0.0"])


async def test_failures_carry_typed_reasons(env: Env) -> None:
    async with connect(env.server()) as c:
        invalid = await call(c, "workflow_create", {"script": "export const meta = { name: 'x' }\n"})
        assert reason(invalid) == "invalid_source" and data(invalid)["errors"][0]["rule"]
        assert (
            reason(await call(c, "workflow_create", {"script": DEPLOY, "version": "1.0"}))
            == "invalid_version"
        )
        assert (
            reason(await call(c, "workflow_get", {"name": "nope", "version": "latest"})) == "invalid_version"
        )
        assert reason(await call(c, "workflow_get", {"name": "nope"})) == "not_found"
        await call(c, "workflow_create", {"script": DEPLOY})
        assert (
            reason(await call(c, "workflow_get", {"name": "deploy", "version": "3.0.0"}))
            == "version_not_found"
        )
        assert (
            reason(await call(c, "workflow_delete", {"name": "deploy", "confirmToken": "forged"}))
            == "confirmation_invalid"
        )
        assert not (env.project / ".claude/workflows").joinpath("x.js").exists()


async def test_a_draft_runs_by_name_at_draft_for_its_author_without_asking(env: Env) -> None:
    async with connect(env.server()) as c:  # no elicitation: an unapproved source could not run
        draft = data(await call(c, "workflow_create_draft", {"script": DEPLOY, "tags": ["wip"]}))
        assert (draft["status"], draft["runAs"]) == ("created", "deploy@draft")
        assert not (env.project / ".claude/workflows").exists()
        assert data(await call(c, "workflow_list", {}))["workflows"] == []
        drafts = data(await call(c, "workflow_list", {"includeDrafts": True}))["workflows"]
        assert [(w["name"], w["kind"], w["path"]) for w in drafts] == [("deploy", "draft", None)]
        ran = data(
            await call(c, "workflow_run", {"name": "deploy@draft", "provider": "fake", "waitMs": 20000})
        )
        assert ran["status"] == "completed", ran
        overwritten = data(
            await call(c, "workflow_create_draft", {"script": DEPLOY.replace("Ship", "Ship v2")})
        )
        assert overwritten["status"] == "overwritten" and overwritten["createdAt"] == draft["createdAt"]
        promoted = data(
            await call(
                c, "workflow_create", {"script": DEPLOY.replace("Ship", "Ship v2"), "version": "1.0.0"}
            )
        )
        assert promoted["promotedDraft"] == draft["draftId"]
        assert reason(await call(c, "workflow_get", {"name": "deploy@draft"})) == "not_found"


async def test_a_draft_is_approved_only_for_the_client_that_created_it(env: Env) -> None:
    alice, bob = Principal("http:alice", scoped=True), Principal("http:bob", scoped=True)
    async with connect(env.server(principal=alice)) as c:
        await call(c, "workflow_create_draft", {"script": DEPLOY})
    async with connect(env.server(principal=bob)) as c:
        refused = await call(c, "workflow_run", {"name": "deploy@draft", "provider": "fake", "waitMs": 0})
        assert refused.is_error and "approv" in text(refused).lower()


async def test_delete_with_elicitation_asks_and_deletes_only_on_yes(env: Env) -> None:
    no = answering()
    async with connect(env.server(), elicitation_callback=no) as c:
        await call(c, "workflow_create", {"script": DEPLOY})
        assert reason(await call(c, "workflow_delete", {"name": "deploy"})) == "cancelled"
        assert "deploy" in no.asked[0] and ".claude/workflows/deploy.js" in no.asked[0]
        assert (env.project / ".claude/workflows/deploy.js").exists()
    yes = answering(confirm=True)
    async with connect(env.server(), elicitation_callback=yes) as c:
        deleted = data(await call(c, "workflow_delete", {"name": "deploy"}))
        assert (deleted["status"], deleted["removedFile"], deleted["removedDirectory"]) == (
            "deleted",
            True,
            True,
        )
        assert not (env.project / ".claude/workflows").exists()
        assert data(await call(c, "workflow_list", {}))["workflows"] == []


async def test_delete_without_elicitation_is_two_steps_with_a_single_use_token(env: Env) -> None:
    async with connect(env.server()) as c:
        await call(c, "workflow_create", {"script": DEPLOY})
        asked = data(await call(c, "workflow_delete", {"name": "deploy"}))
        assert asked["status"] == "confirmation_required" and asked["file"] == ".claude/workflows/deploy.js"
        assert (env.project / ".claude/workflows/deploy.js").exists()
        token = asked["confirmToken"]
        deleted = data(await call(c, "workflow_delete", {"name": "deploy", "confirmToken": token}))
        assert deleted["status"] == "deleted"
        assert (
            reason(await call(c, "workflow_delete", {"name": "deploy", "confirmToken": token}))
            == "confirmation_invalid"
        )


async def test_a_changed_target_is_not_deleted(env: Env) -> None:
    async with connect(env.server()) as c:
        await call(c, "workflow_create", {"script": DEPLOY})
        token = data(await call(c, "workflow_delete", {"name": "deploy"}))["confirmToken"]
        path = env.project / ".claude/workflows/deploy.js"
        path.write_text(DEPLOY.replace("Ship", "Changed"))
        assert (
            reason(await call(c, "workflow_delete", {"name": "deploy", "confirmToken": token}))
            == "target_changed"
        )
        assert "Changed" in path.read_text()


async def test_the_author_prompt_ends_with_the_library_loop(env: Env) -> None:
    async with connect(env.server()) as c:
        prompt = await c.get_prompt("author-workflow", {})
    body = prompt.messages[0].content.text  # type: ignore[union-attr]
    loop = body[body.index("the author loop") :]
    order = [
        loop.index(t) for t in ("workflow_validate", "workflow_create_draft", "@draft", "workflow_create`")
    ]
    assert order == sorted(order)


async def test_a_file_changed_while_the_user_is_asked_is_asked_about_again_never_deleted_unseen(
    env: Env,
) -> None:
    path = env.project / ".claude/workflows/deploy.js"
    asked: list[str] = []

    async def edit_then_agree(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:
            path.write_text(DEPLOY.replace("Ship", "Edited while asked"))
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action="decline")

    async with connect(env.server(), elicitation_callback=edit_then_agree) as c:
        await call(c, "workflow_create", {"script": DEPLOY})
        outcome = await call(c, "workflow_delete", {"name": "deploy"})
    # The yes was given for the source shown first. On the retry round (protocol 2026-07-28) the target
    # is resolved again: the edited file is a new question (its new source hash shown), declined here.
    assert reason(outcome) == "cancelled"
    assert len(asked) == 2 and asked[0] != asked[1]
    assert "Edited" in path.read_text()


async def test_a_confined_server_never_reads_or_writes_the_personal_directory(env: Env) -> None:
    personal = env.home / ".claude" / "workflows"
    personal.mkdir(parents=True)
    (personal / "secret.js").write_text(AUDIT.replace("'audit'", "'secret'"))
    alice = Principal("http:alice", scoped=True)
    async with connect(env.server(principal=alice, confined=True)) as c:
        refused = await call(c, "workflow_create", {"script": DEPLOY, "personal": True})
        assert reason(refused) == "invalid_input" and "reach" in data(refused)["message"]
        assert reason(await call(c, "workflow_get", {"name": "secret"})) == "not_found"
        assert reason(await call(c, "workflow_delete", {"name": "secret"})) == "not_found"
        assert (
            reason(await call(c, "workflow_create_draft", {"script": DEPLOY, "personal": True}))
            == "invalid_input"
        )
        created = data(await call(c, "workflow_create", {"script": DEPLOY}))
        assert created["scope"] == "project"
    assert sorted(p.name for p in personal.iterdir()) == ["secret.js"]


async def test_a_draft_is_validated_and_described_by_name_at_draft(env: Env) -> None:
    async with connect(env.server()) as c:
        await call(c, "workflow_create_draft", {"script": DEPLOY})
        checked = data(await call(c, "workflow_validate", {"name": "deploy@draft"}))
        assert checked["valid"] is True and checked["meta"]["name"] == "deploy"
        described = data(await call(c, "workflow_describe", {"name": "deploy@draft"}))
        assert described["origin"] == "draft" and described["path"] is None and described["approved"] is True
        missing = await call(c, "workflow_validate", {"name": "nope@draft"})
        assert missing.is_error and "not_found" in text(missing)


async def test_author_and_free_form_fields_stay_in_the_library_not_the_file(env: Env) -> None:
    fields = {"team": "core", "reviewers": ["ana", "bo"], "sla": {"hours": 4}}
    async with connect(env.server()) as c:
        await call(
            c, "workflow_create", {"script": DEPLOY, "author": "ana", "fields": fields, "category": "ops"}
        )
        got = data(await call(c, "workflow_get", {"name": "deploy"}))
    assert (got["author"], got["fields"], got["category"]) == ("ana", fields, "ops")
    written = (env.project / ".claude/workflows/deploy.js").read_text()
    assert written == DEPLOY and "core" not in written and "ana" not in written
