"""The worker's whole memory is bounded, not only its V8 heap: ArrayBuffers (outside the heap), strings
and plain arrays all end the run with the same "ran out of memory" error, and the worker's peak RSS
stays under its limit (``--heap-mb`` plus ``MEMORY_OVERHEAD_MB``).

Each bomb runs in a fresh Python process so that ``RUSAGE_CHILDREN`` measures that one worker. Every
bomb stops by itself after 2 GB, so an unbounded worker completes (and fails the test) instead of
exhausting the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from workflow_mcp.realm.worker import memory_limit_mb

HEAP_MB = 64
GB2 = 2 * 1024 * 1024 * 1024

BOMBS = {
    "array-buffers": f"const a = []\nfor (let n = 0; n < {GB2}; n += 1 << 24) a.push(new Uint8Array(1 << 24).fill(1))",
    "strings": f"const a = []\nfor (let n = 0; n < {GB2}; n += 1 << 20) a.push(('x'.repeat(1 << 20) + n).toUpperCase())",
    "arrays": f"const a = []\nfor (let n = 0; n < {GB2}; n += 8e6) a.push(new Array(1e6).fill(n))",
}

RUNNER = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from workflow_mcp import FakeProvider, load_workflow, run_workflow
    from workflow_mcp.engine.run import RunOptions

    async def main():
        wf = load_workflow(source="export const meta = { name: 'bomb', description: 'd' }\\n" + sys.argv[1])
        handle = run_workflow(wf, provider=FakeProvider(), options=RunOptions(heap_mb=int(sys.argv[2])))
        status = await asyncio.wait_for(handle.wait(), 120)
        failed = [e.payload["error"] for e in handle.log.events if e.type == "run.failed"]
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
        print(json.dumps({"status": status, "error": failed[0] if failed else None, "peak_mb": peak}))

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA is enforced on Linux")
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_memory_bomb_fails_with_the_memory_error_and_a_bounded_worker(bomb: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, BOMBS[bomb] + "\nreturn 'survived'", str(HEAP_MB)],
        capture_output=True,
        text=True,
        timeout=150,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed", outcome
    message = outcome["error"]["message"]
    limit = memory_limit_mb(HEAP_MB)
    assert (
        f"the workflow ran out of memory (realm heap limit {HEAP_MB} MB, {limit} MB of memory in all)"
        in message
    )
    assert "--heap-mb" in message and "Array buffer" not in message
    assert outcome["peak_mb"] < limit, outcome
