"""A second HTTP client trying to read files through a real ``workflow-mcp serve --http``: the token
file, the state directory (here inside the project root), files outside the root by ``..``, ``~``,
absolute paths and symbolic links, personal workflows, and nested ``workflow({scriptPath})`` children.
Nothing outside the project roots is read, nothing in the state directory is reachable, and no answer
quotes any of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_kit import BOUND_S, HELLO, call, data, text
from mcp_serve_kit import ALICE, BOB, Site, http_client, http_server, secret

pytestmark = pytest.mark.anyio

SECRET = "TOPSECRET-e2e-5b1d"
READER = """export const meta = { name: 'reader', description: 'runs the child it is given' }
return await workflow({ scriptPath: args.p }, {})
"""


def hostile_site(tmp_path: Path) -> tuple[Site, dict[str, Path]]:
    project = tmp_path / "project"
    site = Site(project=project, home=tmp_path / "home", state=project / ".state")
    (project / ".git").mkdir(parents=True)
    site.home.mkdir()
    site.state.mkdir(mode=0o700)
    token_file = site.state / "http-token"
    token_file.write_text(f"{ALICE}\n{BOB}\n")
    token_file.chmod(0o600)
    site.workflow("hello", HELLO)
    site.workflow("reader", READER)
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_file = outside / "secret.js"
    secret_file.write_text(f"const key = '{SECRET}'\n")
    (site.home / "secret.js").write_text(f"const key = '{SECRET}'\n")
    personal = site.home / ".claude" / "workflows" / "mine.js"
    personal.parent.mkdir(parents=True)
    personal.write_text(f"export const meta = {{ name: 'mine', description: '{SECRET}' }}\nreturn 1\n")
    record = outside / "wf_0123abcd-456.json"  # a Claude Code run record, as `workflow-mcp resume` takes
    record.write_text(json.dumps({"runId": "wf_0123abcd-456", "script": f"// {SECRET}"}))
    (project / "link.js").symlink_to(secret_file)
    (project / "token-link.js").symlink_to(token_file)
    return site, {"secret": secret_file, "token": token_file, "outside": outside, "record": record}


class Transcript:
    """Every answer Bob got, to check that none of them carries a secret."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def refused(self, c: Client, tool: str, arguments: dict[str, Any]) -> str:
        with pytest.raises(MCPError) as caught:
            await c.call_tool(tool, arguments)
        self.seen.append(caught.value.error.message)
        assert caught.value.error.code == INVALID_PARAMS, caught.value.error.message
        return caught.value.error.message

    def keep(self, value: Any) -> Any:
        self.seen.append(json.dumps(value.model_dump(mode="json") if hasattr(value, "model_dump") else value))
        return value


async def test_a_client_reads_nothing_outside_the_roots_nor_the_token_file(tmp_path: Path) -> None:
    site, files = hostile_site(tmp_path)
    seen = Transcript()
    attacks: list[tuple[dict[str, Any], str]] = [
        ({"path": str(files["token"])}, "[state-dir]"),
        ({"path": ".state/http-token"}, "[state-dir]"),
        ({"path": "http-token", "cwd": ".state"}, "[state-dir]"),
        ({"path": "token-link.js"}, "[state-dir]"),
        ({"path": "../outside/secret.js"}, "[outside-roots]"),
        ({"path": "~/secret.js"}, "[outside-roots]"),
        ({"path": str(files["secret"])}, "[outside-roots]"),
        ({"path": "link.js"}, "[outside-roots]"),
        ({"path": "/etc/passwd"}, "[outside-roots]"),
        ({"path": "secret.js", "cwd": str(files["outside"])}, "[outside-roots]"),
    ]
    async with http_server(site, tokens=None) as server, http_client(server.url, BOB) as bob:
        with anyio.fail_after(BOUND_S):
            for arguments, rule in attacks:
                for tool, extra in (
                    ("workflow_validate", {}),
                    ("workflow_describe", {}),
                    ("workflow_run", {"provider": "fake"}),
                ):
                    message = await seen.refused(bob, tool, {**arguments, **extra})
                    assert rule in message and str(site.project) in message, (tool, arguments, message)
            for cwd, rule in (
                (str(site.home), "[outside-roots]"),
                ("..", "[outside-roots]"),
                (".state", "[state-dir]"),
            ):
                for tool, extra in (
                    ("workflow_list", {}),
                    ("workflow_validate", {"name": "hello"}),
                    ("workflow_run", {"name": "hello", "provider": "fake"}),
                ):
                    assert rule in await seen.refused(bob, tool, {"cwd": cwd, **extra}), (tool, cwd)
            listed = seen.keep(data(await call(bob, "workflow_list", {})))
            assert sorted(w["name"] for w in listed["workflows"]) == ["hello", "reader"]
            personal = seen.keep(await call(bob, "workflow_validate", {"name": "mine"}))
            assert personal.is_error and "[outside-roots]" in text(personal)
            with pytest.raises(MCPError) as resource:
                await bob.read_resource("workflow://definitions/mine")
            seen.seen.append(resource.value.error.message)
            child = seen.keep(
                data(
                    await call(
                        bob,
                        "workflow_run",
                        {
                            "name": "reader",
                            "provider": "fake",
                            "args": {"p": str(files["secret"])},
                            "waitMs": 20_000,
                        },
                    )
                )
            )
            assert child["status"] == "failed" and "[outside-roots]" in child["error"]["message"]
            state_child = seen.keep(
                data(
                    await call(
                        bob,
                        "workflow_run",
                        {
                            "name": "reader",
                            "provider": "fake",
                            "args": {"p": ".state/http-token"},
                            "waitMs": 20_000,
                        },
                    )
                )
            )
            assert state_child["status"] == "failed" and "[state-dir]" in state_child["error"]["message"]
            # A run id that is a path (a Claude run record, the token file) reads nothing: only stored
            # runs of this client resume.
            for record in (files["record"], files["token"]):
                resumed = seen.keep(
                    await call(bob, "workflow_run", {"resumeFromRunId": str(record), "provider": "fake"})
                )
                assert resumed.is_error and "is visible to this client" in text(resumed), text(resumed)
    everything = "\n".join(seen.seen)
    assert SECRET not in everything and secret(ALICE) not in everything and secret(BOB) not in everything
    assert all(SECRET not in line and secret(ALICE) not in line for line in server.stderr)
