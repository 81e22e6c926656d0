"""The MCP tools, resources and prompt as a client sees them (the SDK's in-memory ``Client(server)``):
schemas and annotations, definitions tools, the two error planes."""

from __future__ import annotations

import base64
import json

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from workflow_mcp.definitions.profile import get_profile

from mcp_kit import BOUND_S, FAILS, HELLO, Env, call, data, text

pytestmark = pytest.mark.anyio

TOOLS = {
    "workflow_list",
    "workflow_describe",
    "workflow_validate",
    "workflow_run",
    "workflow_plan",
    "workflow_run_status",
    "workflow_run_events",
    "workflow_run_await",
    "workflow_run_cancel",
    "providers_list",
    "agent_run",
    "workflow_create",
    "workflow_create_draft",
    "workflow_get",
    "workflow_delete",
}
READ_ONLY = TOOLS - {
    "workflow_run", "workflow_run_cancel", "agent_run", "workflow_create", "workflow_create_draft", "workflow_delete"
}  # fmt: skip
RUNS = ("workflow_run", "agent_run")


async def test_every_tool_publishes_an_input_schema_an_output_schema_and_annotations(env: Env) -> None:
    async with Client(env.server()) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.input_schema["type"] == "object", name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        assert tool.description and tool.title, name
        a = tool.annotations
        assert a is not None and a.read_only_hint == (name in READ_ONLY), name
        assert a.open_world_hint == (name in RUNS), name
        assert a.destructive_hint == (name in (*RUNS, "workflow_run_cancel", "workflow_delete")), name
    run = tools["workflow_run"].input_schema
    assert run.get("required", []) == []  # provider too: resumeFromRunId alone keeps the run's own
    assert run["properties"]["waitMs"]["maximum"] == 25_000
    assert "approval" not in run["properties"]  # filled by the approval resolver, never by the caller
    output = tools["workflow_run"].output_schema
    assert output is not None and set(output["required"]) == {"runId", "status", "terminal"}


async def test_workflow_list_finds_project_workflows_filters_by_query_and_reports_invalid_files(
    env: Env,
) -> None:
    env.workflow("hello", HELLO)
    env.workflow("fails", FAILS)
    env.workflow("broken", "export const meta = { name: 'broken' }\n")
    async with Client(env.server()) as c:
        listed = data(await call(c, "workflow_list", {}))
        assert [w["name"] for w in listed["workflows"]] == ["fails", "hello"]
        assert all(w["source"] == "project" for w in listed["workflows"])
        assert [d["kind"] for d in listed["diagnostics"]] == ["invalid"]
        greeted = data(await call(c, "workflow_list", {"query": "GREETS"}))
        assert [w["name"] for w in greeted["workflows"]] == ["hello"]
        tagged = data(await call(c, "workflow_list", {"tags": ["review"]}))
        assert tagged["workflows"] == []  # hand-written files carry no library tags
        assert tagged["filters"] == {"tags": ["review"]} and "broaden" in tagged["hint"]


async def test_workflow_describe_gives_meta_hash_dependencies_and_whether_it_may_run(env: Env) -> None:
    env.workflow("child", "export const meta = { name: 'child', description: 'c' }\nreturn 1\n")
    parent = env.workflow(
        "parent",
        "export const meta = { name: 'parent', description: 'calls a child', whenToUse: 'tests' }\n"
        "const a = await workflow('child', {})\n"
        "return await agent('x', { agentType: 'reviewer' })\n",
    )
    async with Client(env.trusted_server()) as c:
        out = data(await call(c, "workflow_describe", {"name": "parent"}))
    assert out["meta"] == {"name": "parent", "description": "calls a child", "whenToUse": "tests"}
    assert out["origin"] == "project" and out["path"] == str(parent)
    assert len(out["sourceHash"]) == 64
    deps = out["dependencies"]
    assert {k: deps[k] for k in ("workflows", "scriptPaths", "agentTypes")} == {
        "workflows": ["child"],
        "scriptPaths": [],
        "agentTypes": ["reviewer"],
    }
    assert [(a["name"], a["resolves"]) for a in deps["agents"]] == [("reviewer", False)]
    assert out["approved"] is True


async def test_workflow_describe_and_validate_say_where_each_agent_type_resolves_from(env: Env) -> None:
    agents = env.project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\ndescription: reviews\n---\nReview.\n")
    (agents / "broken.md").write_text("no frontmatter here\n")
    source = (
        "export const meta = { name: 'uses-agents', description: 'asks for agent types' }\n"
        "await agent('a', { agentType: 'reviewer' })\n"
        "await agent('b', { agentType: 'Explore' })\n"
        "return await agent('c', { agentType: 'missing' })\n"
    )
    env.workflow("uses-agents", source)
    async with Client(env.trusted_server()) as c:
        described = await call(c, "workflow_describe", {"name": "uses-agents"})
        validated = await call(c, "workflow_validate", {"name": "uses-agents"})
    deps = data(described)["dependencies"]
    found = [(a["name"], a["resolves"], a["source"], a["path"], a["line"]) for a in deps["agents"]]
    assert found == [
        ("reviewer", True, "project", str(agents / "reviewer.md"), 2),
        ("Explore", True, "built-in", None, 3),
        ("missing", False, None, None, 4),
    ]
    assert deps["agentFileProblems"] == [
        {
            "path": str(agents / "broken.md"),
            "line": 1,
            "message": "does not start with a `---` line, so it has no frontmatter and defines no agent",
        }
    ]
    assert "'missing' (not found: agent() would reject it)" in text(described)
    assert data(validated)["agents"] == deps["agents"]
    assert data(validated)["agentFileProblems"] == deps["agentFileProblems"]


async def test_workflow_validate_reports_each_error_with_its_rule_and_position(env: Env) -> None:
    async with Client(env.server()) as c:
        bad = await call(
            c, "workflow_validate", {"script": "const x = 1\nexport const meta = { name: 'a' }\n"}
        )
        good = await call(c, "workflow_validate", {"script": HELLO})
    assert not bad.is_error  # an invalid workflow is an answer, not a failure
    report = data(bad)
    assert report["valid"] is False
    (error,) = report["errors"]
    assert error["rule"] == "meta-first-statement" and error["line"] == 1 and error["column"] == 1
    assert "[meta-first-statement]" in text(bad) and ":1:1:" in text(bad)
    assert data(good)["valid"] is True and data(good)["meta"]["name"] == "hello"


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("workflow_run", {"script": HELLO}, "provider"),
        ("workflow_run", {"script": HELLO, "provider": "fake", "waitMs": 25_001}, "waitMs"),
        ("workflow_run", {"script": HELLO, "provider": "fake", "concurrency": 0}, "concurrency"),
        ("workflow_run", {"script": HELLO, "name": "hello", "provider": "fake"}, "exactly one of"),
        ("workflow_run", {"provider": "fake"}, "exactly one of"),
        ("workflow_run", {"script": HELLO, "provider": "nope"}, "unknown provider 'nope'; available: "),
        (
            "workflow_run",
            {"script": HELLO, "provider": "fake", "fakeScript": {"rules": 3}},
            "invalid fakeScript",
        ),
        ("workflow_run_events", {"runId": "r", "limit": 0}, "limit"),
        ("workflow_run_status", {}, "runId"),
        ("workflow_validate", {}, "exactly one of"),
        ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
    ],
)
async def test_bad_tool_arguments_are_invalid_params_errors(
    env: Env, tool: str, arguments: dict[str, object], says: str
) -> None:
    async with Client(env.server()) as c:
        with pytest.raises(MCPError) as caught:
            await c.call_tool(tool, arguments)
    assert caught.value.error.code == INVALID_PARAMS
    assert says in caught.value.error.message


async def test_a_failed_workflow_is_an_error_result_that_says_what_to_do_next(env: Env) -> None:
    env.workflow("fails", FAILS)
    async with Client(env.trusted_server()) as c:
        with anyio.fail_after(BOUND_S):
            result = await call(c, "workflow_run", {"name": "fails", "provider": "fake", "waitMs": 20_000})
    assert result.is_error
    out = data(result)
    assert out["status"] == "failed" and out["terminal"] is True and "result" not in out
    assert out["error"]["message"] == "boom: the input was wrong"
    assert "workflow_run_status" in text(result) and f"resumeFromRunId '{out['runId']}'" in text(result)


async def test_an_unknown_workflow_or_run_is_an_error_result_pointing_to_the_tool_that_helps(
    env: Env,
) -> None:
    env.workflow("hello", HELLO)
    async with Client(env.trusted_server()) as c:
        missing = await call(c, "workflow_run", {"name": "helo", "provider": "fake"})
        broken = await call(c, "workflow_run", {"script": "export const meta = {}\n", "provider": "fake"})
        no_run = await call(c, "workflow_run_status", {"runId": "run_nope"})
    assert missing.is_error and "workflow_list" in text(missing)
    assert broken.is_error and "workflow_validate" in text(broken) and "[meta-name]" in text(broken)
    assert no_run.is_error and "No run 'run_nope' is visible" in text(no_run)


async def test_providers_list_names_what_workflow_run_accepts(env: Env) -> None:
    async with Client(env.server()) as c:
        out = data(await call(c, "providers_list", {}))
    names = [p["name"] for p in out["providers"]]
    assert names == env.service.provider_names() and {"fake", "gemini", "qwen"} <= set(names)
    fake = next(p for p in out["providers"] if p["name"] == "fake")
    assert fake["available"] is True and fake["origin"] == "registered"
    assert fake["capabilities"]["structuredOutput"] is True and fake["capabilities"]["tokenUsage"] is True
    qwen = next(p for p in out["providers"] if p["name"] == "qwen")  # a preset: an ACP agent by name
    assert qwen["origin"] == "preset" and qwen["use"] == "acp"


async def test_the_author_workflow_prompt_is_generated_from_the_profile(env: Env) -> None:
    profile = get_profile()
    async with Client(env.server()) as c:
        (prompt,) = (await c.list_prompts()).prompts
        assert prompt.name == "author-workflow"
        assert [(a.name, a.required) for a in prompt.arguments or []] == [("task", False)]
        got = await c.get_prompt("author-workflow", {"task": "triage flaky tests"})
    body = got.messages[0].content
    assert body.type == "text"
    assert body.text.startswith("Write a workflow for this task:\n\ntriage flaky tests")
    assert profile.name in body.text
    assert f"{profile.max_agent_calls:,}" in body.text and f"{profile.max_fanout_items:,}" in body.text
    assert "workflow_validate" in body.text


async def test_resources_expose_definitions_run_snapshots_event_pages_and_recent_runs(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with Client(env.trusted_server()) as c:
        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        assert templates == {
            "workflow://definitions/{name}",
            "workflow://runs/{runId}",
            "workflow://runs/{runId}/events{?after}",
            "workflow://runs/{runId}/artifacts/{artifactId}",
        }
        source = (await c.read_resource("workflow://definitions/hello")).contents[0]
        assert source.mime_type == "text/javascript" and getattr(source, "text", "") == HELLO
        with anyio.fail_after(BOUND_S):
            run = data(await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000}))
        rid = run["runId"]
        snap = json.loads(getattr((await c.read_resource(f"workflow://runs/{rid}")).contents[0], "text", ""))
        assert snap["status"] == "completed" and snap["workflow"] == "hello"
        page = json.loads(
            getattr((await c.read_resource(f"workflow://runs/{rid}/events?after=2")).contents[0], "text", "")
        )
        assert page["events"][0]["sequence"] == 3 and page["hasMore"] is False
        listed = [r.uri for r in (await c.list_resources()).resources]
        assert f"workflow://runs/{rid}" in listed
        with pytest.raises(MCPError):
            await c.read_resource("workflow://runs/run_nope")


async def test_an_artifact_resource_keeps_its_own_mime_type(env: Env) -> None:
    env.workflow("hello", HELLO)
    async with Client(env.trusted_server()) as c:
        with anyio.fail_after(BOUND_S):
            rid = data(
                await call(c, "workflow_run", {"name": "hello", "provider": "fake", "waitMs": 20_000})
            )["runId"]
        env.service.store.put_artifact(rid, "art_1", "report.md", "text/markdown", b"# findings\n")
        (content,) = (await c.read_resource(f"workflow://runs/{rid}/artifacts/art_1")).contents
        with pytest.raises(MCPError):
            await c.read_resource(f"workflow://runs/{rid}/artifacts/art_2")
    assert content.mime_type == "text/markdown"
    assert base64.b64decode(getattr(content, "blob", "")) == b"# findings\n"


async def test_agent_run_makes_one_validated_agent_call_and_returns_its_answer(env: Env) -> None:
    schema = {"type": "object", "properties": {"kind": {"enum": ["bug", "feature"]}}, "required": ["kind"]}
    script = {"rules": [{"match": {"label": "triage"}, "respond": {"result": {"kind": "feature"}}}]}
    async with Client(env.server()) as c:
        out = data(
            await call(
                c,
                "agent_run",
                {
                    "prompt": "Classify: add dark mode",
                    "provider": "fake",
                    "fakeScript": script,
                    "schema": schema,
                    "label": "triage",
                },
            )
        )
        assert out["status"] == "completed" and out["result"] == {"kind": "feature"}
        events = data(await call(c, "workflow_run_events", {"runId": out["runId"]}))
        types = [e["type"] for e in events["events"]]
        assert types.count("agent.started") == 1 and types[-1] == "run.completed"


async def test_agent_run_reports_an_answer_that_never_fits_the_schema_as_an_error_result(env: Env) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    script = {"default": {"result": {"n": "not a number"}}}
    async with Client(env.server()) as c:
        result = await call(
            c, "agent_run", {"prompt": "count", "provider": "fake", "fakeScript": script, "schema": schema}
        )
    assert result.is_error
    assert "StructuredOutput retry cap (5) exceeded" in text(result)


async def test_workflow_run_takes_a_named_provider_and_its_events_name_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = env.root / "state"
    state.mkdir()
    (state / "config.toml").write_text('[providers.scripted]\nuse = "fake"\n')
    monkeypatch.setenv("WORKFLOW_MCP_HOME", str(state))
    env.workflow("hello", HELLO)
    async with Client(env.trusted_server()) as c:
        listed = {p["name"]: p for p in data(await call(c, "providers_list", {}))["providers"]}
        with anyio.fail_after(BOUND_S):
            run = data(
                await call(c, "workflow_run", {"name": "hello", "provider": "scripted", "waitMs": 20_000})
            )
        events = data(await call(c, "workflow_run_events", {"runId": run["runId"]}))["events"]
    assert listed["scripted"]["origin"] == "configured" and listed["scripted"]["use"] == "fake"
    assert run["status"] == "completed"
    assert {e["payload"]["provider"] for e in events if e["type"] == "agent.started"} == {"scripted"}
