"""What cannot work is refused before any agent runs, as an MCP client sees it (the SDK's in-memory
``Client``): a logged-out provider, an unmapped Claude model alias, a schema call to a provider
without structured output — invalid params, nothing recorded; ``providers_list`` says "not logged
in". Providers are registered in process the way a third party's would be."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from workflow_mcp.providers.base import (
    AgentContext,
    AgentRequest,
    AgentResult,
    ProviderCapabilities,
)
from workflow_mcp.providers.policy import Policy
from workflow_mcp.providers.registry import Availability, register_provider, unregister_provider

from mcp_kit import Env, call, connect, data, dumps

pytestmark = pytest.mark.anyio


class Plain:
    """A provider that answers text only and takes no Claude model names; it records its calls."""

    calls: ClassVar[list[AgentRequest]] = []

    def __init__(self, name: str, structured: bool) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(structured_output=structured, streaming=True)

    async def execute(self, request: AgentRequest, context: AgentContext) -> AgentResult:
        Plain.calls.append(request)
        return AgentResult(text="plain answer")

    async def aclose(self) -> None:
        return None


class Factory:
    def __init__(self, name: str, *, logged_in: bool | None, structured: bool = True) -> None:
        self.name = name
        self.capabilities = ProviderCapabilities(structured_output=structured, streaming=True)
        self.accepts_claude_models = False
        self.logged_in = logged_in

    def probe(self, settings: Any) -> Availability:
        problem = None if self.logged_in is not False else f"run `{self.name} login` first"
        return Availability(True, version="1.0", logged_in=self.logged_in, problem=problem)

    def create(self, settings: Any, *, policy: Policy, source: str) -> Plain:
        return Plain(self.name, self.capabilities.structured_output)


@pytest.fixture(autouse=True)
def providers() -> Iterator[None]:
    Plain.calls = []
    made = {
        "locked": Factory("locked", logged_in=False),
        "plain": Factory("plain", logged_in=None, structured=False),
    }
    for name, factory in made.items():
        register_provider(name, factory)
    yield
    for name in made:
        unregister_provider(name)


def wf(body: str) -> str:
    return "export const meta = { name: 'pre', description: 'preflight' }\n" + body


async def refused(env: Env, arguments: dict[str, Any]) -> str:
    async with connect(env.trusted_server()) as c:
        with pytest.raises(MCPError) as caught:
            await call(c, "workflow_run", {"waitMs": 0, **arguments})
        listed = data(await call(c, "providers_list", {}))
    assert caught.value.error.code == INVALID_PARAMS
    assert Plain.calls == [] and env.service.list_runs() == [] and listed["providers"]
    return caught.value.error.message


async def test_providers_list_says_not_logged_in_instead_of_ready(env: Env) -> None:
    async with connect(env.trusted_server()) as c:
        out = await call(c, "providers_list", {})
    by_name = {p["name"]: p for p in data(out)["providers"]}
    locked = by_name["locked"]
    assert locked["available"] is True and locked["ready"] is False and locked["loggedIn"] is False
    assert "Not logged in: run `locked login` first" in locked["description"]
    assert by_name["fake"]["ready"] is True
    assert "locked" in out.content[0].text.split("not logged in: ")[1]  # type: ignore[union-attr]


async def test_a_run_on_a_logged_out_provider_is_invalid_params_and_starts_nothing(env: Env) -> None:
    path = env.workflow("pre", wf("return await agent('x')\n"))
    message = await refused(env, {"path": str(path), "provider": "locked"})
    assert "provider 'locked' is not logged in: run `locked login` first" in message


async def test_an_unmapped_claude_alias_is_invalid_params_naming_the_call_and_the_missing_file(
    env: Env,
) -> None:
    path = env.workflow(
        "pre", wf("const a = await agent('x', { label: 'a' })\nreturn await agent('y', { model: 'HAIKU' })\n")
    )
    message = await refused(env, {"path": str(path), "provider": "plain", "args": {}})
    assert f"{path}:3:14: this agent() call cannot run with this configuration" in message
    assert "model 'haiku' is a Claude model alias and provider 'plain' does not run Claude models" in message
    assert "there is no configuration file: create workflow-mcp.toml" in message


async def test_a_schema_call_to_a_provider_without_structured_output_is_invalid_params(env: Env) -> None:
    path = env.workflow("pre", wf("return await agent('x', { schema: { type: 'object' } })\n"))
    message = await refused(env, {"path": str(path), "provider": "plain"})
    assert f"{path}:2:14:" in message and "has no structured output capability" in message


async def test_calls_whose_options_are_only_known_at_run_time_are_left_to_the_run(env: Env) -> None:
    path = env.workflow(
        "pre",
        wf(
            "const o = args.text ? null : { type: 'object' }\n"
            "return await agent('x', { schema: args.text ? null : o, model: args.model, label: 'l' })\n"
        ),
    )
    async with connect(env.trusted_server()) as c:
        out = data(
            await call(
                c,
                "workflow_run",
                {"path": str(path), "provider": "plain", "args": {"text": True}, "waitMs": 20_000},
            )
        )
    assert out["status"] == "completed", dumps(out)
    assert [r.prompt for r in Plain.calls] == ["x"]


async def test_an_option_written_after_a_spread_is_certain_and_refused(env: Env) -> None:
    path = env.workflow(
        "pre", wf("const o = { label: 'x' }\nreturn await agent('y', { ...o, model: 'opus' })\n")
    )
    message = await refused(env, {"path": str(path), "provider": "plain"})
    assert f"{path}:3:14: this agent() call cannot run" in message and "model 'opus'" in message


async def test_an_option_a_later_spread_may_override_is_left_to_the_run(env: Env) -> None:
    path = env.workflow("pre", wf("return await agent('y', { model: 'opus', ...args.opts })\n"))
    async with connect(env.trusted_server()) as c:
        out = data(
            await call(
                c,
                "workflow_run",
                {
                    "path": str(path),
                    "provider": "plain",
                    "args": {"opts": {"model": "m-1"}},
                    "waitMs": 20_000,
                },
            )
        )
    assert out["status"] == "completed" and out["result"] == "plain answer", dumps(out)


CHILD = "export const meta = { name: 'child', description: 'a nested one' }\nreturn await agent('c', { model: 'sonnet' })\n"


async def test_a_nested_workflow_by_script_path_is_looked_into_and_named_with_its_caller(env: Env) -> None:
    child = env.project / "child.js"
    child.write_text(CHILD)
    path = env.workflow("pre", wf("return await workflow({ scriptPath: 'child.js' })\n"))
    message = await refused(env, {"path": str(path), "provider": "plain"})
    assert message.startswith(
        f"{child}:2:14 (a nested workflow, run by workflow() at {path}:2:14): this agent() call cannot run"
    )
    assert "model 'sonnet' is a Claude model alias" in message


async def test_a_nested_workflow_by_name_two_levels_down_is_looked_into(env: Env) -> None:
    env.workflow("child", CHILD)
    middle = env.workflow(
        "middle",
        "export const meta = { name: 'middle', description: 'calls child' }\nreturn await workflow('child')\n",
    )
    path = env.workflow("pre", wf("return await workflow({ name: 'middle' })\n"))
    message = await refused(env, {"path": str(path), "provider": "plain"})
    assert f"(a nested workflow, run by workflow() at {middle}:2:14)" in message


async def test_a_workflow_that_runs_itself_is_looked_into_once(env: Env) -> None:
    path = env.workflow(
        "pre", wf("if (args.again) await workflow('pre', {})\nreturn await agent('x', { label: 'l' })\n")
    )
    async with connect(env.trusted_server()) as c:
        out = data(
            await call(
                c, "workflow_run", {"path": str(path), "provider": "plain", "args": {}, "waitMs": 20_000}
            )
        )
    assert out["status"] == "completed", dumps(out)


async def test_a_nested_workflow_the_server_may_not_run_is_left_to_the_run(env: Env) -> None:
    outside = env.root / "elsewhere"
    outside.mkdir()
    (outside / "child.js").write_text(CHILD)
    path = env.workflow(
        "pre", wf(f"return await workflow({{ scriptPath: {str(outside / 'child.js')!r} }})\n")
    )
    async with connect(env.server(trust=(str(env.project),), confined=True)) as c:
        out = data(await call(c, "workflow_run", {"path": str(path), "provider": "plain", "waitMs": 20_000}))
    # Not refused before the run (that would say something about a file outside the server's roots):
    # the run itself rejects the nested call, with the scope's own words.
    assert out["status"] == "failed" and Plain.calls == [], dumps(out)
    assert "outside this server's project roots" in out["error"]["message"]
