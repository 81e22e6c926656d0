"""MCP server benchmarks against a real ``workflow-mcp serve`` process over stdio (fake provider).

    python benchmarks/mcp.py [--repeat N] [--startup-only]

Figures (with their targets):
- spawn → `initialize` answered by the stdio server, best and median of --repeat (target ≤ 0.3 s),
  beside its floor: the same for a bare SDK server (`MCPServer` over stdio, nothing of ours) and the
  time of `import mcp` alone (the SDK imports its HTTP stack eagerly, python-sdk#1770)
- initialize → first tool result over stdio, on a started server (≤ 0.5 s); also the cold figure
  from process spawn, which adds Python and SDK import time
- workflow_run_events throughput: events per second paged through the tool (limit 1,000)
- 20 concurrent background runs through one server: time to start all 20, and until all ended
- `workflow_run` of 1,000 zero-delay fake calls on a warm server, against the CLI's engine time for the
  same workflow measured in the same benchmark run (≤ 1.3×); with and without a progress token
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This file is called mcp.py: keep its own folder off the path so `import mcp` finds the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from mcp import Client, StdioServerParameters  # noqa: E402

CLI = str(Path(sys.executable).with_name("workflow-mcp"))

WIDE = (
    "export const meta = { name: 'wide', description: 'many agents, many events' }\n"
    "const r = await parallel(Array.from({ length: (args && args.n) || 1000 }, (_, i) => () => agent('n' + i)))\n"
    "return r.length\n"
)
STEPS = (
    "export const meta = { name: 'steps', description: 'sequential agents' }\n"
    "let k = 0\n"
    "for (let i = 0; i < ((args && args.n) || 10); i++) { await agent('step ' + i); k++ }\n"
    "return k\n"
)


class Site:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="wfmcp-bench-"))
        self.project = self.root / "project"
        (self.project / ".git").mkdir(parents=True)
        folder = self.project / ".claude" / "workflows"
        folder.mkdir(parents=True)
        (folder / "wide.js").write_text(WIDE)
        (folder / "steps.js").write_text(STEPS)
        (self.root / "home").mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "WORKFLOW_MCP_HOME": str(self.root / "state"),
            "HOME": str(self.root / "home"),
        }
        if "PYTHONPATH" in os.environ:  # measure the source under test (e.g. a worktree's src/)
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    def argv(self) -> list[str]:
        return [CLI, "serve", "--trust", str(self.project)]


async def _line(stream: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(60):
        line = await stream.readline()
    if not line:
        raise RuntimeError("the server closed its output")
    return line


BARE_SDK_SERVER = "from mcp.server.mcpserver import MCPServer; MCPServer('floor').run('stdio')"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def spawn_to_initialize(site: Site, argv: list[str]) -> tuple[float, float]:
    """``(wall seconds from spawning argv to the answer to its first `initialize` over stdio, CPU
    seconds the process used in its whole life)``. CPU time tells what load on a shared machine
    (other processes taking the cores) does to the wall-clock figure."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=site.project,
        env=site.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin and proc.stdout
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "b", "version": "0"},
        },
    }
    proc.stdin.write((json.dumps(init) + "\n").encode())
    while json.loads(await _line(proc.stdout)).get("id") != 1:
        pass
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    async with asyncio.timeout(30):
        await proc.wait()
    return elapsed, _children_cpu() - cpu


def import_time(statement: str) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` for a fresh interpreter to run ``statement`` (start-up included)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, timeout=60)
    return time.perf_counter() - start, _children_cpu() - cpu


def best_and_median(samples: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in samples]
    cpu = [c for _, c in samples]
    return (
        f"best {min(wall) * 1000:.0f} ms, median {statistics.median(wall) * 1000:.0f} ms "
        f"(CPU: best {min(cpu) * 1000:.0f} ms, median {statistics.median(cpu) * 1000:.0f} ms)"
    )


async def startup(site: Site, repeat: int) -> None:
    """Print spawn → `initialize` of the stdio server and its floor, sampled in turns (same load)."""
    ours: list[tuple[float, float]] = []
    bare: list[tuple[float, float]] = []
    sdk: list[tuple[float, float]] = []
    for _ in range(repeat):
        ours.append(await spawn_to_initialize(site, site.argv()))
        bare.append(await spawn_to_initialize(site, [sys.executable, "-c", BARE_SDK_SERVER]))
        sdk.append(import_time("import mcp"))
    print(
        f"stdio spawn → initialize (workflow-mcp serve): {best_and_median(ours)} of {repeat} (target ≤ 300 ms)"
    )
    print(f"  floor, a bare SDK server (MCPServer over stdio): {best_and_median(bare)}")
    print(f"  floor, a fresh interpreter running `import mcp`: {best_and_median(sdk)}")
    print(
        "  workflow-mcp's own share (serve − bare SDK server, best against best): "
        f"{(min(w for w, _ in ours) - min(w for w, _ in bare)) * 1000:.0f} ms wall, "
        f"{(min(c for _, c in ours) - min(c for _, c in bare)) * 1000:.0f} ms CPU"
    )


async def first_result(site: Site, tool: str, *, warm: bool) -> float:
    """Seconds from `initialize` (warm: sent once the server says it is ready; cold: right after the
    spawn) to the first `tools/call` result."""
    proc = await asyncio.create_subprocess_exec(
        *site.argv(),
        cwd=site.project,
        env=site.env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    start = time.perf_counter()
    if warm:
        while b"serving MCP on stdio" not in await _line(proc.stderr):
            pass
        start = time.perf_counter()

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin
        proc.stdin.write((json.dumps(message) + "\n").encode())

    async def answer(ident: int) -> dict[str, Any]:
        assert proc.stdout
        while True:
            message = json.loads(await _line(proc.stdout))
            if message.get("id") == ident:
                return dict(message)

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "b", "version": "0"},
            },
        }
    )
    await answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
    result = await answer(2)
    elapsed = time.perf_counter() - start
    assert "result" in result and not result["result"].get("isError"), result
    proc.stdin.close()
    async with asyncio.timeout(30):
        await proc.wait()
    return elapsed


async def events_throughput(site: Site, n: int) -> tuple[int, float]:
    """(events, events per second) paging a finished run's log through workflow_run_events."""
    params = StdioServerParameters(
        command=site.argv()[0], args=site.argv()[1:], env=site.env, cwd=str(site.project)
    )
    async with Client(params) as c:
        run = await c.call_tool(
            "workflow_run", {"name": "wide", "provider": "fake", "args": {"n": n}, "waitMs": 25_000}
        )
        assert run.structured_content and run.structured_content["status"] == "completed", run
        rid = run.structured_content["runId"]
        start = time.perf_counter()
        cursor, count = 0, 0
        while True:
            page = await c.call_tool("workflow_run_events", {"runId": rid, "after": cursor, "limit": 1000})
            assert page.structured_content is not None
            count += len(page.structured_content["events"])
            cursor = page.structured_content["nextCursor"]
            if not page.structured_content["hasMore"]:
                break
        elapsed = time.perf_counter() - start
    return count, count / elapsed


async def concurrent_runs(site: Site, runs: int, steps: int) -> tuple[float, float]:
    """(seconds to start all runs, seconds until all ended) for `runs` background runs at once (on a
    server whose --max-runs admits them all)."""
    params = StdioServerParameters(
        command=site.argv()[0],
        args=[*site.argv()[1:], "--max-runs", str(runs)],
        env=site.env,
        cwd=str(site.project),
    )
    async with Client(params) as c:
        await c.list_tools()
        start = time.perf_counter()
        handles = await asyncio.gather(
            *(
                c.call_tool("workflow_run", {"name": "steps", "provider": "fake", "args": {"n": steps}})
                for _ in range(runs)
            )
        )
        started = time.perf_counter() - start
        ids = [h.structured_content["runId"] for h in handles if h.structured_content]
        assert len(set(ids)) == runs, handles
        outcomes = await asyncio.gather(
            *(c.call_tool("workflow_run_await", {"runId": rid, "waitMs": 25_000}) for rid in ids)
        )
        ended = time.perf_counter() - start
        statuses = {o.structured_content["status"] for o in outcomes if o.structured_content}
        assert statuses == {"completed"}, statuses
    return started, ended


def _engine_span(events: list[dict[str, Any]]) -> float:
    """Seconds from a run's ``run.started`` to its ``run.completed`` event (their timestamps, ms)."""
    stamps = {e["type"]: dt.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) for e in events}
    return (stamps["run.completed"] - stamps["run.started"]).total_seconds()


async def _run_span(c: Client, run_id: str) -> float:
    """The engine span of a finished run: its first event (``run.started``) to its last
    (``run.completed``)."""
    status = await c.call_tool("workflow_run_status", {"runId": run_id, "lastN": 0, "logLines": 0})
    assert status.structured_content is not None
    last = int(status.structured_content["lastSequence"])
    ends = []
    for after in (0, last - 1):
        page = await c.call_tool("workflow_run_events", {"runId": run_id, "after": after, "limit": 1})
        assert page.structured_content is not None
        ends += page.structured_content["events"]
    return _engine_span(ends)


def cli_engine_time(site: Site, n: int) -> float:
    """The CLI's engine time for the `wide` workflow of ``n`` calls: ``run.started`` → ``run.completed``
    of `workflow-mcp run --events jsonl` (the same SQLite store and fake provider as the server's)."""
    done = subprocess.run(
        [CLI, "run", "wide", json.dumps({"n": n}), "--provider", "fake", "--events", "jsonl"],
        cwd=site.project,
        env=site.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return _engine_span([json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")])


async def warm_workflow_run(site: Site, n: int, repeat: int) -> tuple[float, float, float, float]:
    """Best seconds of (`workflow_run` without a progress token, with one, the engine span of those runs,
    the CLI's engine time) for the `wide` workflow of ``n`` calls, on a server that has already run it
    once. The CLI and the tool are measured in turn, so a busy machine slows both alike."""
    params = StdioServerParameters(
        command=site.argv()[0], args=site.argv()[1:], env=site.env, cwd=str(site.project)
    )
    arguments = {"name": "wide", "provider": "fake", "args": {"n": n}, "waitMs": 25_000}
    notes: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(progress)

    async with Client(params) as c:
        await c.call_tool("workflow_run", arguments)  # warm: imports, discovery, first worker spawn
        plain, tracked, spans, cli = [], [], [], []
        for _ in range(repeat):
            cli.append(await asyncio.to_thread(cli_engine_time, site, n))
            for bucket, callback in ((plain, None), (tracked, on_progress)):
                start = time.perf_counter()
                run = await c.call_tool("workflow_run", arguments, progress_callback=callback)
                bucket.append(time.perf_counter() - start)
                assert run.structured_content and run.structured_content["status"] == "completed", run
                spans.append(await _run_span(c, run.structured_content["runId"]))
    assert notes, "a client that sent a progress token got no progress notification"
    return min(plain), min(tracked), min(spans), min(cli)


async def main(repeat: int, startup_only: bool) -> None:
    site = Site()
    await startup(site, repeat)
    if startup_only:
        return
    warm = min([await first_result(site, "workflow_list", warm=True) for _ in range(repeat)])
    warm_status = min([await first_result(site, "providers_list", warm=True) for _ in range(repeat)])
    cold = min([await first_result(site, "workflow_list", warm=False) for _ in range(repeat)])
    print(
        f"stdio initialize → first tool result (workflow_list, server started): {warm * 1000:.0f} ms (target ≤ 500 ms)"
    )
    print(
        f"stdio initialize → first tool result (providers_list, server started): {warm_status * 1000:.0f} ms"
    )
    print(f"stdio spawn → initialize → first tool result (workflow_list, cold): {cold * 1000:.0f} ms")
    count, rate = max(
        [await events_throughput(site, 1000) for _ in range(max(1, repeat // 2))], key=lambda x: x[1]
    )
    print(
        f"workflow_run_events throughput over stdio: {rate:,.0f} events/s ({count:,} events, pages of 1,000)"
    )
    n = 1000
    plain, tracked, span, cli = await warm_workflow_run(site, n, repeat)
    print(
        f"workflow_run of {n:,} zero-delay fake calls, warm server: {plain * 1000:.0f} ms without a progress "
        f"token, {tracked * 1000:.0f} ms with one (engine {span * 1000:.0f} ms); CLI engine time "
        f"{cli * 1000:.0f} ms: {plain / cli:.2f}× / {tracked / cli:.2f}× (target ≤ 1.3×)"
    )
    best = min([await concurrent_runs(site, 20, 10) for _ in range(max(1, repeat // 2))], key=lambda x: x[1])
    print(
        f"20 concurrent background runs (10 agent calls each) through one server: all started in "
        f"{best[0] * 1000:.0f} ms, all completed in {best[1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--startup-only", action="store_true", help="only the spawn → initialize figures")
    options = parser.parse_args()
    asyncio.run(main(options.repeat, options.startup_only))
