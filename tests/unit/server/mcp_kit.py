"""Shared parts of the MCP tests (``tests/unit/server``, ``tests/e2e/mcp``): a real service (in-memory
store, real Node realm, fake provider) behind the real SDK server, workflows, and client helpers that
check every structured result against the tool's published output schema.

Every wait in these tests is bounded (``anyio.fail_after``) and nothing sleeps to synchronise: tests wait
on run events, never on time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from mcp import Client
from mcp.types import CallToolResult, ElicitResult

from workflow_mcp.server import (
    LOCAL,
    FileScope,
    Principal,
    ServerPolicy,
    SourceTrust,
    WorkflowMcpServer,
    create_server,
)
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.memory import MemoryStore

BOUND_S = 30.0
"""Upper bound of any single wait in these tests."""

HELLO = """export const meta = { name: 'hello', description: 'greets', phases: [{ title: 'Greet' }] }
phase('Greet')
const a = await agent('hello ' + (args && args.who), { label: 'greet' })
log('greeted ' + a)
return { a, args: args === undefined ? 'undefined' : args }
"""

STEPS = """export const meta = { name: 'steps', description: 'n sequential agent calls' }
const n = (args && args.n) || 5
const out = []
for (let i = 0; i < n; i++) out.push(await agent('step ' + i, { label: 'step-' + i }))
log('done ' + out.length)
return out.length
"""

FAILS = """export const meta = { name: 'fails', description: 'throws after one call' }
await agent('first', { label: 'first' })
throw new Error('boom: the input was wrong')
"""

PARK = {"default": {"delayMs": 120000}}
"""A fake script that parks every agent call until the run is cancelled."""


@dataclass
class Env:
    """A project directory (a git root with .claude/workflows), a home and the service over them."""

    root: Path
    project: Path
    home: Path
    service: WorkflowService

    def workflow(self, name: str, source: str) -> Path:
        """Write a project workflow and return its path."""
        path = self.project / ".claude" / "workflows" / f"{name}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def server(
        self,
        *,
        trust: tuple[str, ...] = (),
        principal: Principal | None = LOCAL,
        policy: ServerPolicy | None = None,
        approvals: str | None = None,
        confined: bool = False,
        state: Path | None = None,
    ) -> WorkflowMcpServer:
        """``confined`` gives the server an HTTP server's file scope (project roots: ``trust`` and the
        project); ``state`` is its state directory (default: ``root/state``), unreachable either way."""
        state_dir = str(state or self.root / "state")
        return create_server(
            self.service,
            policy=policy,
            trust=SourceTrust(trusted_dirs=trust, approvals_path=approvals),
            principal=principal,
            scope=FileScope.of(
                cwd=self.service.cwd, trust_dirs=trust, state_dir=state_dir, confined=confined
            ),
        )

    def trusted_server(self, **kwargs: Any) -> WorkflowMcpServer:
        """A server that trusts the project directory (its workflows run without asking)."""
        return self.server(trust=(str(self.project),), **kwargs)


def make_env(tmp_path: Path) -> Env:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    service = WorkflowService(MemoryStore(), cwd=str(project), home=str(home))
    return Env(root=tmp_path, project=project, home=home, service=service)


@asynccontextmanager
async def connect(server: Any, **kwargs: Any) -> AsyncIterator[Client]:
    """``Client(server, **kwargs)`` whose whole use is bounded by ``BOUND_S``."""
    with anyio.fail_after(BOUND_S):
        async with Client(server, **kwargs) as client:
            yield client


def approve(answer: bool = True) -> Callable[..., Any]:
    """An elicitation callback that answers every approval question with ``answer``."""

    async def callback(context: Any, params: Any) -> ElicitResult:
        callback.asked.append(params.message)  # type: ignore[attr-defined]
        return ElicitResult(action="accept", content={"approve": answer})

    callback.asked = []  # type: ignore[attr-defined]
    return callback


_SCHEMAS: dict[int, dict[str, Any]] = {}


async def call(client: Client, tool: str, arguments: dict[str, Any], **kwargs: Any) -> CallToolResult:
    """``client.call_tool`` that also checks every structured result against the tool's published
    output schema, independently of the SDK (jsonschema, draft 2020-12)."""
    key = id(client)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = {t.name: t.output_schema for t in (await client.list_tools()).tools}
    result = await client.call_tool(tool, arguments, **kwargs)
    schema = _SCHEMAS[key].get(tool)
    if result.structured_content is not None and schema is not None:
        jsonschema.Draft202012Validator(schema).validate(result.structured_content)
    assert result.content and result.content[0].type == "text" and result.content[0].text.strip()
    return result


def text(result: CallToolResult) -> str:
    block = result.content[0]
    assert block.type == "text"
    return block.text


def data(result: CallToolResult) -> dict[str, Any]:
    content: dict[str, Any] | None = result.structured_content
    assert content is not None, text(result)
    return content


async def all_events(client: Client, run_id: str) -> list[dict[str, Any]]:
    """Every event of a finished run, paged through the cursor."""
    out: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = data(
            await call(client, "workflow_run_events", {"runId": run_id, "after": cursor, "limit": 50})
        )
        out += page["events"]
        cursor = page["nextCursor"]
        if not page["hasMore"]:
            return out


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def wait_for_event(c: Client, run_id: str, kind: str, count: int = 1) -> int:
    """Follow the run's events (long-poll, bounded) until the ``count``-th of type ``kind``; return its
    sequence."""
    cursor, seen = 0, 0
    with anyio.fail_after(BOUND_S):
        while True:
            page = data(
                await call(c, "workflow_run_events", {"runId": run_id, "after": cursor, "waitMs": 5000})
            )
            for e in page["events"]:
                seen += e["type"] == kind
                if seen == count:
                    return int(e["sequence"])
            cursor = page["nextCursor"]
            assert not (page["terminal"] and not page["hasMore"]), f"run ended without {count} {kind}"
