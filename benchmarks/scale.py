"""Scale-out benchmarks. Prints one line per figure.

    python benchmarks/scale.py [--starts N] [--repeat N] [--database-url postgresql://…]

- realm worker start-up (spawn to ``hello``, then close), bare and under ``--sandbox bwrap``, median
  and 90th percentile of N starts each, and the sandbox's overhead;
- a whole one-call run through the engine, bare and sandboxed;
- events per second into the store during a 1,000-call fan-out run through ``WorkflowService``
  (concurrency 16, fake provider), SQLite file vs PostgreSQL: the time spent inside
  ``append_many`` (the store's share) and end to end. PostgreSQL is the server ``--database-url``
  names (a fresh schema in it), else a throw-away local cluster (``initdb`` from Debian's
  ``postgresql``, as the tests start it); skipped, saying so, when neither is available.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workflow_mcp import FakeProvider, load_workflow
from workflow_mcp.engine.run import RunOptions
from workflow_mcp.events import Event
from workflow_mcp.realm.worker import RealmWorker
from workflow_mcp.service import WorkflowService
from workflow_mcp.store import SqliteStore
from workflow_mcp.store.base import RunStore

from helpers import run_async

THOUSAND = (
    "export const meta = { name: 'thousand', description: '1,000 agents' }\n"
    "const r = await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('n' + i)))\n"
    "return r.length\n"
)


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]


async def _start(sandbox: str) -> float:
    began = time.perf_counter()
    worker = await RealmWorker.spawn(sandbox=sandbox)  # type: ignore[arg-type]
    took = time.perf_counter() - began
    await worker.close()
    return took


async def _run(sandbox: str) -> float:
    began = time.perf_counter()
    outcome = await run_async("return await agent('one')", sandbox=sandbox)
    assert outcome.status == "completed", outcome.error
    return time.perf_counter() - began


async def _alternating(measure: Callable[[str], Awaitable[float]], n: int) -> tuple[list[float], list[float]]:
    """``n`` samples of each variant, taken in turns, so a busy machine slows both alike."""
    bare, boxed = [], []
    for _ in range(n):
        bare.append(await measure("none"))
        boxed.append(await measure("bwrap"))
    return bare, boxed


def sandbox_overhead(n: int) -> None:
    if shutil.which("bwrap") is None:
        print("sandbox: bwrap is not installed (Debian package bubblewrap); skipped")
        return
    asyncio.run(_alternating(_start, 2))  # warm the page cache and ldd's answer
    for label, measure in (("worker start-up", _start), ("one-call run", _run)):
        bare, boxed = asyncio.run(_alternating(measure, n))
        (b50, b90), (s50, s90) = _quantiles(bare), _quantiles(boxed)
        print(
            f"{label}: bare median {b50 * 1000:.1f} ms (p90 {b90 * 1000:.1f}), bwrap median "
            f"{s50 * 1000:.1f} ms (p90 {s90 * 1000:.1f}); sandbox overhead {(s50 - b50) * 1000:+.1f} ms "
            f"median over {n} each"
        )


class TimedStore:
    """A store that counts the time its ``append_many`` takes (the store's share of a run)."""

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner
        self.seconds = 0.0

    def append_many(self, events: list[Event]) -> None:
        began = time.perf_counter()
        self.inner.append_many(events)
        self.seconds += time.perf_counter() - began

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def _fan_out(store: RunStore, cwd: str) -> tuple[float, float, int]:
    timed = TimedStore(store)
    service = WorkflowService(timed, cwd=cwd)  # type: ignore[arg-type]
    began = time.perf_counter()
    handle = service.start_run(
        load_workflow(source=THOUSAND),
        provider=FakeProvider({"default": {"text": "ok"}}),
        options=RunOptions(concurrency=16, cwd=cwd),
    )
    assert await handle.result() == 1000
    elapsed = time.perf_counter() - began
    await service.shutdown()
    return timed.seconds, elapsed, len(handle.log.events)


def _rates(make: Callable[[], RunStore], cwd: str, repeat: int) -> tuple[float, float, int]:
    best_store, best_total, events = 0.0, 0.0, 0
    for _ in range(repeat):
        store = make()
        try:
            in_store, total, events = asyncio.run(_fan_out(store, cwd))
        finally:
            store.close()
        best_store = max(best_store, events / in_store)
        best_total = max(best_total, events / total)
    return best_store, best_total, events


def store_throughput(repeat: int, database_url: str | None) -> None:

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        rows = [("SQLite", _rates(lambda: SqliteStore(Path(tmp, "state.db")), tmp, repeat))]
        url = database_url
        if url is None:
            from postgres_server import pg_bin, running_postgres

            if pg_bin() is not None:
                url = stack.enter_context(running_postgres()).fresh_schema()
        if url is None:
            print("PostgreSQL: no --database-url and no local postgresql binaries; skipped")
        else:
            from workflow_mcp.store.postgres import PostgresStore

            if database_url is not None:  # a fresh schema on the given server, dropped after
                url = _fresh_schema(database_url, stack)
            rows.append(("PostgreSQL", _rates(lambda: PostgresStore(url), tmp, repeat)))
        for name, (in_store, total, events) in rows:
            print(
                f"events into {name}: {in_store:9.0f}/s in the store, {total:7.0f}/s end to end "
                f"({events} events of a 1,000-call fan-out at concurrency 16, best of {repeat})"
            )


def _fresh_schema(url: str, stack: contextlib.ExitStack) -> str:
    import secrets

    import psycopg

    name = "bench_" + secrets.token_hex(4)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")

    stack.callback(drop)
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options=-csearch_path%3D{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20, help="worker starts (and runs) per variant")
    parser.add_argument("--repeat", type=int, default=3, help="fan-out runs per store")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server to measure")
    ns = parser.parse_args()
    if ns.starts > 0:
        sandbox_overhead(ns.starts)
    store_throughput(ns.repeat, ns.database_url)


if __name__ == "__main__":
    main()
