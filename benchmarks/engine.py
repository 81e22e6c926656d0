"""Engine benchmarks on the fake provider. Prints one line per figure (best of N runs).

    python benchmarks/engine.py [--repeat N]

Figures (targets from the foundation issue):
- cold CLI `run` of a 1-agent workflow, wall time (≤ 0.4 s)
- 1,000 zero-delay agent calls, engine time from run start to result (≤ 0.25 s)
- the host CPU time of those 1,000 calls per call (this process only, not Node; ≤ 70 µs), whole run
- the same 1,000 calls each naming a project agent type (definitions read once per run)
- a 4,096-item 3-stage pure-JS pipeline, engine time (≤ 0.3 s)
- `validate` of a 100 KB file: API and CLI wall time (≤ 0.15 s)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workflow_mcp import FakeProvider, load_workflow, run_workflow
from workflow_mcp.definitions import _analysis
from workflow_mcp.definitions.load import validate_workflow
from workflow_mcp.engine.run import RunOptions

CLI = str(Path(sys.executable).with_name("workflow-mcp"))

ONE_AGENT = "export const meta = { name: 'one', description: 'one agent' }\nreturn await agent('hi')\n"
THOUSAND = (
    "export const meta = { name: 'thousand', description: '1,000 agents' }\n"
    "const r = await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('n' + i)))\n"
    "return r.length\n"
)
TYPED = (
    "export const meta = { name: 'typed', description: '1,000 agents of one type' }\n"
    "const r = await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('n' + i, { agentType: 'worker' })))\n"
    "return r.length\n"
)
AGENT_FILE = "---\nname: worker\ndescription: does the work\ntools: Read, Grep\nmodel: haiku\n---\nWork.\n"
PIPELINE = (
    "export const meta = { name: 'pipe', description: 'pure-JS pipeline' }\n"
    "const r = await pipeline(Array.from({ length: 4096 }, (_, i) => i),\n"
    "  (x) => x + 1, async (x) => x * 2, (x, item, i) => ({ x, item, i }))\n"
    "return r.length\n"
)


def big_source(size: int = 100_000) -> str:
    head = "export const meta = { name: 'big', description: 'a 100 KB workflow' }\n"
    lines = [head]
    i = 0
    while sum(len(x) for x in lines) < size:
        lines.append(
            f"const v{i} = await agent('step {i}: ' + JSON.stringify({{ i: {i}, s: 'x' }}), {{ label: 's{i}' }})\n"
        )
        i += 1
    lines.append("return 1\n")
    return "".join(lines)


async def engine_time(source: str, concurrency: int = 16, cwd: str | None = None) -> float:
    wf = load_workflow(source=source)
    start = time.perf_counter()
    run = run_workflow(
        wf,
        provider=FakeProvider({"default": {"text": "ok"}}),
        options=RunOptions(concurrency=concurrency, cwd=cwd, home=cwd),
    )
    await run.result()
    return time.perf_counter() - start


async def host_cpu(source: str, concurrency: int = 16) -> float:
    """CPU seconds this process spends on one run of ``source`` (the Node worker's own time excluded),
    from run start to result."""
    wf = load_workflow(source=source)
    start = time.process_time()
    run = run_workflow(
        wf, provider=FakeProvider({"default": {"text": "ok"}}), options=RunOptions(concurrency=concurrency)
    )
    await run.result()
    return time.process_time() - start


def best(fn, repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def cli_wall(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [CLI, *argv], cwd=cwd, capture_output=True, check=True, env={**os.environ, "WORKFLOW_MCP_HOME": cwd}
    )
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    n = ap.parse_args().repeat
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp, "one.js")
        one.write_text(ONE_AGENT)
        big = Path(tmp, "big.js")
        big.write_text(big_source())
        cold = best(lambda: cli_wall(["run", str(one), "--provider", "fake", "--events", "none"], tmp), n)
        print(f"cold CLI run, 1 agent:            {cold * 1000:7.1f} ms  (target 400 ms)")
        t = best(lambda: asyncio.run(engine_time(THOUSAND)), n)
        print(
            f"1,000 zero-delay agent calls:     {t * 1000:7.1f} ms  (target 250 ms, concurrency 16, incl. worker spawn)"
        )
        cpu = best(lambda: asyncio.run(host_cpu(THOUSAND)), n)
        print(
            f"host CPU per zero-delay agent call: {cpu * 1e6 / 1000:6.1f} µs  (target 70 µs; 1,000 calls, whole run, "
            "this process only)"
        )
        project = Path(tmp, "project")
        (project / ".git").mkdir(parents=True)
        (project / ".claude" / "agents").mkdir(parents=True)
        (project / ".claude" / "agents" / "worker.md").write_text(AGENT_FILE)
        t = best(lambda: asyncio.run(engine_time(TYPED, cwd=str(project))), n)
        print(f"1,000 calls naming an agent type: {t * 1000:7.1f} ms  (definitions read once per run)")
        t = best(lambda: asyncio.run(engine_time(PIPELINE)), n)
        print(f"4,096-item 3-stage JS pipeline:   {t * 1000:7.1f} ms  (target 300 ms, incl. worker spawn)")
        size = big.stat().st_size

        def api(cold: bool) -> float:
            if cold:  # forget V8 verdicts so the syntax check really spawns Node
                _analysis._VERDICTS.clear()
            s = time.perf_counter()
            validate_workflow(big)
            return time.perf_counter() - s

        print(
            f"validate {size / 1000:.0f} KB file, API cold:   {best(lambda: api(True), n) * 1000:7.1f} ms  (target 150 ms)"
        )
        print(
            f"validate {size / 1000:.0f} KB file, API warm:   {best(lambda: api(False), n) * 1000:7.1f} ms  (V8 verdict cached)"
        )
        t = best(lambda: cli_wall(["validate", str(big)], tmp), n)
        print(f"validate {size / 1000:.0f} KB file, CLI wall:   {t * 1000:7.1f} ms  (target 150 ms)")


if __name__ == "__main__":
    main()
