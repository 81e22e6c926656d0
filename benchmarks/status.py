"""Run-status benchmarks: what asking for a run's status costs, on a big stored run and on a live one.

    python benchmarks/status.py [--events N] [--repeat N]

Figures (service issue, one status vocabulary; best of N):
- ``RunStore.last_run_event`` (a run's newest status event: ``runs list``, ``workflow_run_events``,
  awaiting another process's run) on a running run of N events (default 1,000,000) — an index lookup,
  not a walk back through the log
- ``RunStore.unfinished_runs`` (what every recovery reads) with that run in the store
- ``WorkflowService.status`` of a live 1,000-call run (the state the service keeps) against projecting
  the same run's stored log, which is what it cost before the state was kept
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workflow_mcp import FakeProvider, load_workflow
from workflow_mcp.events import Event
from workflow_mcp.service import WorkflowService
from workflow_mcp.state import project_state
from workflow_mcp.store.base import RunRecord
from workflow_mcp.store.sqlite import SqliteStore

STAMP = "2026-01-01T00:00:00.000Z"
THOUSAND = (
    "export const meta = { name: 'thousand', description: '1,000 agents' }\n"
    "const r = await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('n' + i)))\n"
    "return r.length\n"
)


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def big_running_run(store: SqliteStore, n: int) -> str:
    """A run whose only status event is its first (``run.started``), followed by ``n - 1`` agent and
    log events: the worst case for finding its newest status event."""
    run_id = "run_big"
    store.create_run(
        RunRecord(run_id=run_id, workflow_name="big", source_hash="0" * 64, source="", created_at=STAMP)
    )
    batch = [Event(run_id=run_id, sequence=1, type="run.started", timestamp=STAMP)]
    for seq in range(2, n + 1):
        if seq % 2:
            batch.append(
                Event(run_id, seq, "agent.output.delta", {"text": "x"}, timestamp=STAMP, agent_id="ag_0001")
            )
        else:
            batch.append(Event(run_id, seq, "log", {"message": f"line {seq}"}, timestamp=STAMP))
        if len(batch) == 50_000:
            store.append_many(batch)
            batch = []
    store.append_many(batch)
    return run_id


def live_status(repeat: int) -> tuple[float, float]:
    """(ms of ``status`` of a finished live 1,000-call run, ms of projecting its stored log)."""

    async def go() -> tuple[float, float]:
        with tempfile.TemporaryDirectory() as folder:
            store = SqliteStore(Path(folder) / "state.db")
            service = WorkflowService(store, cwd=folder)
            handle = service.start_run(load_workflow(source=THOUSAND), provider=FakeProvider())
            await handle.result()
            kept = best_ms(lambda: service.status(handle.run_id), repeat)
            projected = best_ms(lambda: project_state(store.events(handle.run_id)), repeat)
            store.close()
            return kept, projected

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "state.db")
        run_id = big_running_run(store, opts.events)
        last = best_ms(lambda: store.last_run_event(run_id), opts.repeat)
        unfinished = best_ms(store.unfinished_runs, opts.repeat)
        store.close()
    print(f"last_run_event, running run of {opts.events:,} events: {last:8.2f} ms")
    print(f"unfinished_runs with that run stored:          {unfinished:8.2f} ms")
    kept, projected = live_status(opts.repeat)
    print(
        f"status of a live 1,000-call run: {kept:.2f} ms (the kept state) vs {projected:.1f} ms "
        "(projecting its stored log)"
    )


if __name__ == "__main__":
    main()
