"""The workflow library of two ``workflow-mcp serve --http`` processes on one PostgreSQL database: what is
created through server A (versions, tags, drafts, a delete confirmation) is listed, described, run and
answered through server B, and outlives both servers."""

from __future__ import annotations

import anyio
import pytest

from mcp_kit import BOUND_S, call, data
from mcp_serve_kit import ALICE, Site, http_client, http_server

pytestmark = pytest.mark.anyio

DEPLOY = "export const meta = { name: 'deploy', description: 'Ship it' }\nreturn await agent('ship')\n"
PLAN = "export const meta = { name: 'plan', description: 'a draft plan' }\nreturn await agent('plan it')\n"


def reason(result: object) -> str:
    return str(data(result)["reason"])  # type: ignore[arg-type]


async def test_a_version_and_a_draft_created_through_one_server_are_listed_and_described_through_another(
    site: Site, postgres_url: str
) -> None:
    args = ("--database-url", postgres_url)
    async with (
        http_server(site, args=args) as a,
        http_server(site, args=args) as b,
        http_client(a.url, ALICE) as on_a,
        http_client(b.url, ALICE) as on_b,
    ):
        with anyio.fail_after(BOUND_S):
            first = await call(
                on_a, "workflow_create", {"script": DEPLOY, "tags": ["ops"], "category": "release"}
            )
            assert not first.is_error, data(first)
            bumped = DEPLOY.replace("Ship it", "Ship it again")
            second = await call(
                on_a, "workflow_create", {"script": bumped, "version": "1.1.0", "tags": ["ops"]}
            )
            assert not second.is_error, data(second)
            made = data(await call(on_a, "workflow_create_draft", {"script": PLAN, "tags": ["wip"]}))

            listed = data(await call(on_b, "workflow_list", {"tags": ["ops"]}))["workflows"]
            assert [(w["name"], w["version"], w["versions"]) for w in listed] == [
                ("deploy", "1.1.0", ["1.1.0", "1.0.0"])
            ]
            old = data(await call(on_b, "workflow_get", {"name": "deploy", "version": "1.0.0"}))
            assert (old["source"], old["current"]) == (DEPLOY, False)
            described = data(await call(on_b, "workflow_describe", {"name": "deploy"}))
            assert described["sidecar"]["version"] == "1.1.0"
            drafts = data(await call(on_b, "workflow_list", {"includeDrafts": True, "tags": ["wip"]}))
            assert [(w["name"], w["kind"]) for w in drafts["workflows"]] == [("plan", "draft")]
            ran = data(
                await call(
                    on_b, "workflow_run", {"name": made["runAs"], "provider": "fake", "waitMs": 20_000}
                )
            )
            assert ran["status"] == "completed", ran

            # Of one name@version created through both servers, exactly one create wins.
            third = DEPLOY.replace("Ship it", "Ship it thrice")
            outcomes: list[object] = []

            async def create(client: object) -> None:
                args = {"script": third, "version": "2.0.0"}
                outcomes.append(await call(client, "workflow_create", args))  # type: ignore[arg-type]

            async with anyio.create_task_group() as tg:
                tg.start_soon(create, on_a)
                tg.start_soon(create, on_b)
            assert sorted(bool(r.is_error) for r in outcomes) == [False, True]  # type: ignore[attr-defined]
            assert [reason(r) for r in outcomes if r.is_error] == ["already_exists"]  # type: ignore[attr-defined]

            # A confirmation asked for through A is answered through B, once.
            token = data(await call(on_a, "workflow_delete", {"name": "deploy", "version": "1.0.0"}))[
                "confirmToken"
            ]
            deleted = await call(
                on_b, "workflow_delete", {"name": "deploy", "version": "1.0.0", "confirmToken": token}
            )
            assert not deleted.is_error, data(deleted)
            replay = await call(
                on_a, "workflow_delete", {"name": "deploy", "version": "1.0.0", "confirmToken": token}
            )
            assert reason(replay) == "confirmation_invalid"

    # Both servers are gone; a new one finds everything in the database.
    async with http_server(site, args=args) as c, http_client(c.url, ALICE) as on_c:
        with anyio.fail_after(BOUND_S):
            row = data(await call(on_c, "workflow_list", {"includeDrafts": True}))["workflows"]
            assert sorted(
                (w["name"], w["kind"], w["version"]) for w in row if w["name"] in ("deploy", "plan")
            ) == [
                ("deploy", "permanent", "2.0.0"),
                ("plan", "draft", None),
            ]
            kept = data(await call(on_c, "workflow_get", {"name": "deploy"}))["versions"]
            assert kept == ["2.0.0", "1.1.0"]
