"""agent({agentType}): the engine resolves the agent definition before anything is queued, and what the
definition holds travels on the request (profile claude-code/2.1.332; the measured end-to-end facts
are the agents-* conformance cases). What only the engine decides runs on the scripted in-memory
realm; what the realm takes part in (child workflows, refusal messages) runs on Node."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from workflow_mcp.providers import FakeProvider
from workflow_mcp.providers.base import AgentContext, AgentRequest, AgentResult
from workflow_mcp.realm.scripted import AgentRejected, ScriptedWorkflow

from helpers import RecordingProvider, count, run_scripted, run_source

AUDITOR = """---
name: auditor
description: Audits code
tools: Read, Grep, Bash
disallowedTools: Bash
model: haiku
effort: max
---

You audit code. MARKER.
"""


def project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    root = tmp_path / "work"
    (root / ".git").mkdir(parents=True)
    for rel, text in {".claude/agents/auditor.md": AUDITOR, **(files or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_provider_sees_the_definitions_instructions_tools_model_and_effort(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    provider = FakeProvider({"default": {"text": "{agentType}|{model}|{effort}|{tools}|{disallowedTools}"}})

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.agent("p", agentType="auditor")

    outcome = run_scripted(script, provider=provider, cwd=str(cwd), home=str(tmp_path))
    assert outcome.result == "auditor|haiku|max|Read,Grep|Bash"
    (request,) = provider.calls
    assert request.instructions == "You audit code. MARKER."
    assert request.read_only


def test_options_win_over_the_definition_and_disallowed_tools_are_subtracted_from_its_tools(
    tmp_path: Path,
) -> None:
    cwd = project(tmp_path)
    provider = FakeProvider({"default": {"text": "{model}|{effort}|{tools}|{disallowedTools}"}})

    async def script(realm: ScriptedWorkflow) -> list[Any]:
        return [
            await realm.agent(
                "a", agentType="auditor", model="Sonnet", effort="LOW", disallowedTools=["Grep"]
            ),
            await realm.agent("b", agentType="auditor", model="inherit"),
            await realm.agent("c", agentType="auditor", model=None, effort="ultra"),
        ]

    outcome = run_scripted(script, provider=provider, cwd=str(cwd), home=str(tmp_path))
    assert outcome.result == ["sonnet|low|Read|Bash,Grep", "|max|Read,Grep|Bash", "haiku|max|Read,Grep|Bash"]


def test_a_call_without_agent_type_carries_no_definition() -> None:
    provider = FakeProvider({"default": {"text": "[{agentType}][{instructions}][{tools}]"}})

    async def script(realm: ScriptedWorkflow) -> Any:
        return await realm.agent("p", model="HAIKU")

    outcome = run_scripted(script, provider=provider)
    assert outcome.result == "[][][*]"
    assert provider.calls[0].model == "haiku" and not provider.calls[0].read_only


def test_the_started_event_names_the_agent_type_and_the_file_that_defined_it(tmp_path: Path) -> None:
    cwd = project(tmp_path)

    async def script(realm: ScriptedWorkflow) -> Any:
        await realm.agent("a", agentType="auditor")
        return await realm.agent("b", agentType="Explore")

    outcome = run_scripted(script, cwd=str(cwd), home=str(tmp_path))
    first, second = outcome.of("agent.started")
    assert first.payload["agentType"] == "auditor" and first.payload["agentSource"] == "project"
    assert first.payload["agentFile"] == str(cwd / ".claude" / "agents" / "auditor.md")
    assert first.payload["model"] == "haiku"
    assert second.payload["agentType"] == "Explore" and second.payload["agentSource"] == "built-in"
    assert "agentFile" not in second.payload


def test_a_file_that_defines_no_agent_is_reported_once_as_a_warning_with_file_and_line(
    tmp_path: Path,
) -> None:
    broken = "---\nname: broken\ndescription: x\n\tbad: tab\n---\nB\n"
    cwd = project(tmp_path, {".claude/agents/broken.md": broken})
    body = (
        "const out = []\n"
        "for (const t of ['auditor', 'broken', 'auditor']) {\n"
        "  try { out.push(await agent('p ' + out.length, { agentType: t })) } catch (e) { out.push('refused') }\n"
        "}\n"
        "return out"
    )
    outcome = run_source(body, cwd=str(cwd), home=str(tmp_path))
    assert outcome.result == ["p 0", "refused", "p 2"]
    (warning,) = outcome.of("warning")
    path = str(cwd / ".claude" / "agents" / "broken.md")
    assert warning.payload["path"] == path and warning.payload["line"] == 4
    assert str(warning.payload["message"]).startswith(
        f"agent file {path}:4: its frontmatter is not valid YAML"
    )
    assert outcome.types().index("warning") < outcome.types().index("agent.queued")


def test_agent_definitions_are_read_once_per_run(tmp_path: Path) -> None:
    cwd = project(tmp_path)

    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        late = "---\nname: late\ndescription: written during the run\n---\nL\n"
        (cwd / ".claude" / "agents" / "late.md").write_text(late)
        return AgentResult(text="done")

    async def script(realm: ScriptedWorkflow) -> str:
        await realm.agent("first", agentType="auditor")
        try:
            await realm.agent("second", agentType="late")
        except AgentRejected as exc:
            return exc.message
        return "found"

    outcome = run_scripted(script, provider=RecordingProvider(answer), cwd=str(cwd), home=str(tmp_path))
    assert re.match(
        r"agent\(\{agentType\}\): agent type 'late' not found\. Available agents: ", outcome.result
    )


def test_a_child_workflow_resolves_agent_types_from_the_runs_directory(tmp_path: Path) -> None:
    child = (
        "export const meta = { name: 'kid', description: 'asks for an agent type' }\n"
        "return await agent('from the child', { agentType: 'auditor' })\n"
    )
    cwd = project(tmp_path, {".claude/workflows/kid.js": child})
    provider = FakeProvider({"default": {"text": "{agentType}:{model}"}})
    outcome = run_source("return await workflow('kid')", provider=provider, cwd=str(cwd), home=str(tmp_path))
    assert outcome.result == "auditor:haiku"


def test_an_unknown_or_toolless_type_is_refused_before_the_provider_and_counts_toward_the_cap(
    tmp_path: Path,
) -> None:
    cwd = project(
        tmp_path, {".claude/agents/lower.md": "---\nname: lower\ndescription: d\ntools: read\n---\nL\n"}
    )
    provider = FakeProvider()
    body = (
        "const out = []\n"
        "for (const t of ['nope', 'lower', 'auditor']) {\n"
        "  try { await agent('p', { agentType: t }); out.push('ran') } catch (e) { out.push(e.name) }\n"
        "}\n"
        "return out"
    )
    outcome = run_source(body, provider=provider, cwd=str(cwd), home=str(tmp_path), max_agents=2)
    assert outcome.result == ["Error", "TelemetrySafeError", "Error"]
    assert provider.calls == [] and count(outcome.events, "agent.queued") == 0


def test_the_schema_keywords_claude_refuses_are_refused_and_the_rest_run() -> None:
    # Measured one by one with the oracle (Claude Code 2.1.332, 2026-12-01): Ajv's draft-07 strict mode.
    refused = {
        "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}},
        "prefixItems": {"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{}]}}},
        "unevaluatedProperties": {"type": "object", "unevaluatedProperties": False},
        "maxContains": {"type": "object", "properties": {"a": {"type": "array", "maxContains": 2}}},
        "$anchor": {"type": "object", "$anchor": "x"},
        "$dynamicRef": {"type": "object", "properties": {"a": {"$dynamicRef": "#x"}}},
        "discriminator": {"type": "object", "discriminator": {"propertyName": "k"}},
        "x-foo": {"type": "object", "x-foo": 1},
    }
    accepted = [
        {"type": "object", "deprecated": True, "examples": [{}], "$comment": "c", "$id": "http://e.com/s"},
        {
            "type": "object",
            "properties": {"a": {"type": "string", "contentMediaType": "x", "contentSchema": {}}},
        },
        {"type": "object", "if": {"required": ["a"]}, "then": {}, "else": {}, "dependencies": {"a": ["b"]}},
        {"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}, "definitions": {"x": {}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}},
        {"type": "object", "$schema": "http://json-schema.org/draft-07/schema"},
        {"type": "object", "$ref": "#/$defs/r", "$defs": {"r": {"type": "object"}}},
    ]

    async def script(realm: ScriptedWorkflow) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, schema in refused.items():
            try:
                await realm.agent("r " + key, schema=schema)
                out[key] = "ran"
            except AgentRejected as exc:
                out[key] = exc.message
        out["accepted"] = [type(await realm.agent("a", schema=schema)).__name__ for schema in accepted]
        return out

    outcome = run_scripted(script, provider=FakeProvider({"default": {"result": {}}}))
    assert outcome.status == "completed", outcome.error
    messages = dict(outcome.result)
    assert messages.pop("accepted") == ["dict"] * len(accepted)
    assert messages == {
        k: f'agent({{schema}}) received an invalid JSON Schema: strict mode: unknown keyword: "{k}"'
        for k in refused
    }


def test_other_json_schema_dialects_and_unresolvable_references_are_refused_before_the_provider() -> None:
    schemas: list[dict[str, Any]] = [
        {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": "object", "properties": {"a": {"$ref": "http://example.com/x.json"}}},
        {"type": "object", "properties": {"a": {"enum": []}}},
        {"type": "object", "properties": {"a": {"type": "string", "minLength": -1}}},
    ]

    async def script(realm: ScriptedWorkflow) -> list[str]:
        out: list[str] = []
        for schema in schemas:
            try:
                await realm.agent("x", schema=schema)
                out.append("ran")
            except AgentRejected as exc:
                out.append(exc.message)
        return out

    provider = FakeProvider()
    outcome = run_scripted(script, provider=provider)
    prefix = "agent({schema}) received an invalid JSON Schema: "
    draft04, remote, enum, negative = outcome.result
    assert draft04.startswith(prefix + 'no schema with key or ref "http://json-schema.org/draft-04/schema#"')
    assert remote == prefix + "can't resolve reference http://example.com/x.json from id #"
    assert enum == prefix + "data/properties/a/enum must NOT have fewer than 1 items"
    assert negative == prefix + "data/properties/a/minLength must be >= 0"
    assert provider.calls == []


def test_nullable_lets_null_through_as_ajv_does_and_the_retry_cap_names_the_last_error() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "nullable": True}, "n": {"type": "integer"}},
        "required": ["n"],
    }
    script = {
        "rules": [
            {"match": {"prompt": "^null$"}, "respond": {"result": {"s": None, "n": 1}}},
            {"match": {"prompt": "^bad$"}, "respond": {"result": {"n": "x"}}},
        ]
    }

    async def workflow(realm: ScriptedWorkflow) -> list[Any]:
        ok = await realm.agent("null", schema=schema)
        try:
            await realm.agent("bad", schema=schema)
        except AgentRejected as exc:
            return [ok, exc.name, exc.message]
        return [ok]

    outcome = run_scripted(workflow, provider=FakeProvider(script))
    assert outcome.result == [
        {"s": None, "n": 1},
        "TelemetrySafeError",
        "agent({schema}): StructuredOutput retry cap (5) exceeded — 5 failed calls with no valid output — "
        "last StructuredOutput error: Output does not match required schema: /n: must be integer",
    ]


def test_under_profile_2_1_209_roots_are_not_refused_nothing_is_converted_and_colon_names_load(
    tmp_path: Path,
) -> None:
    cwd = project(tmp_path, {".claude/agents/plug.md": "---\nname: plug:helper\ndescription: d\n---\nP\n"})
    script = {
        "rules": [
            {"match": {"prompt": "^array$"}, "respond": {"text": "reached the provider"}},
            {"match": {"prompt": "^number$"}, "respond": {"result": {"n": "5"}}},
        ],
        "default": {"text": "{agentType}"},
    }
    body = """
const out = []
try { out.push(await agent('array', { schema: { type: 'array' } })) } catch (e) { out.push(e.name) }
try { out.push(await agent('number', { schema: { type: 'object', properties: { n: { type: 'integer' } } } })) }
catch (e) { out.push(e.message.split(';')[0]) }
out.push(await agent('plug', { agentType: 'plug:helper' }))
return out
"""
    provider = FakeProvider(script)
    outcome = run_source(
        body, provider=provider, cwd=str(cwd), home=str(tmp_path), profile="claude-code/2.1.209"
    )
    assert provider.calls[0].prompt == "array" and provider.calls[0].schema == {"type": "array"}
    assert outcome.result == [
        "Error",  # the array root reached the provider, whose text answer has no structured output
        "agent({schema}): StructuredOutput retry cap (5) exceeded — 5 failed calls with no valid output",
        "plug:helper",
    ]
