"""Scale-out benchmarks. Prints one line per figure.

    python benchmarks/scale.py [--starts N] [--repeat N] [--database-url postgresql://…]
                               [--ray-calls N] [--ray-address HOST:PORT]

- realm worker start-up (spawn to ``hello``, then close), bare and under ``--sandbox bwrap``, median
  and 90th percentile of N starts each, and the sandbox's overhead;
- a whole one-call run through the engine, bare and sandboxed;
- events per second into the store during a 1,000-call fan-out run through ``WorkflowService``
  (concurrency 16, fake provider), SQLite file vs PostgreSQL: the time spent inside
  ``append_many`` (the store's share) and end to end. PostgreSQL is the server ``--database-url``
  names (a fresh schema in it), else a throw-away local cluster (``initdb`` from Debian's
  ``postgresql``, as the tests start it); skipped, saying so, when neither is available;
- agent calls on Ray (``--executor ray``): a 200-call fan-out with a 50 ms provider delay at
  concurrency 32, local vs Ray (2 call runners), results compared; the Ray path's overhead per call
  (one call at a time, no delay); an ``isolation: 'worktree'`` call's (its worktree made and removed on
  the node that runs it), locally and on Ray, and the first one's on Ray (its node's pinned runner
  starts); the memory of the local Ray cluster it started (``--ray-address``
  measures an existing cluster instead, memory then not counted). Skipped, saying so, without ``ray``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import statistics
import subprocess
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


FAN_OUT = (
    "export const meta = { name: 'fan-out', description: 'N agents at once' }\n"
    "return await parallel(Array.from({ length: args.n }, (_, i) => () => agent('call ' + i)))\n"
)
ONE_AT_A_TIME = (
    "export const meta = { name: 'one-at-a-time', description: 'N agents in turn' }\n"
    "const out = []\n"
    "for (let i = 0; i < args.n; i++) out.push(await agent('call ' + i))\n"
    "return out\n"
)
ISOLATED_AT_A_TIME = ONE_AT_A_TIME.replace(
    "agent('call ' + i)", "agent('call ' + i, { isolation: 'worktree' })"
)


async def _calls(
    source: str, n: int, delay_ms: int, concurrency: int, executor: object, cwd: str | None = None
) -> tuple[float, object]:
    from workflow_mcp.engine.run import run_workflow

    script = {"default": {"echo": True, "delayMs": delay_ms}}
    began = time.perf_counter()
    handle = run_workflow(
        load_workflow(source=source),
        provider=FakeProvider(script),
        args={"n": n},
        options=RunOptions(
            concurrency=concurrency,
            cwd=cwd or tempfile.gettempdir(),
            worktree_root=os.path.join(cwd, ".trees") if cwd else None,  # goes with the repository
        ),
        executor=executor,  # type: ignore[arg-type]
    )
    result = await handle.result()
    return time.perf_counter() - began, result


def _descendants_rss_mb() -> float:
    """The resident memory of every process descended from this one (a local Ray cluster), in MB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
        rss[int(entry.name)] = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
    ours, frontier = set(), [os.getpid()]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in ours]
        ours.update(children)
        frontier.extend(children)
    return sum(rss.get(pid, 0) for pid in ours) / 1024


def _repository(stack: contextlib.ExitStack) -> str:
    """A throw-away git repository with one commit (worktree calls need one)."""
    repo = stack.enter_context(tempfile.TemporaryDirectory(prefix="wfbench-repo-"))
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
    Path(repo, "README").write_text("base\n")
    for argv in (["init", "-q"], ["add", "README"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *ident, *argv], cwd=repo, check=True)
    return repo


def ray_calls(n: int, address: str | None) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        print("ray: not installed (pip install 'workflow-mcp[ray]'); skipped")
        return
    from workflow_mcp.engine.executor import ProviderSpec, RayCluster
    from workflow_mcp.providers.config import ProviderConfig

    began = time.perf_counter()
    cluster = RayCluster.connect(
        address, runners=2, init_options={} if address else {"num_cpus": 2, "object_store_memory": 100 << 20}
    )
    spec = ProviderSpec(
        name="fake",
        cwd=tempfile.gettempdir(),
        config=ProviderConfig(),
        fake_script={"default": {"echo": True}},
    )
    spec_delayed = ProviderSpec(
        name="fake",
        cwd=tempfile.gettempdir(),
        config=ProviderConfig(),
        fake_script={"default": {"echo": True, "delayMs": 50}},
    )
    stack = contextlib.ExitStack()
    try:
        repo = _repository(stack)
        spec_repo = dataclasses.replace(spec, cwd=repo)

        async def measure() -> None:
            await cluster.wait_ready()
            ready = time.perf_counter() - began
            await _calls(FAN_OUT, 32, 50, 32, cluster.executor(spec_delayed))  # warm both runners
            local_s, local = await _calls(FAN_OUT, n, 50, 32, None)
            ray_s, remote = await _calls(FAN_OUT, n, 50, 32, cluster.executor(spec_delayed))
            assert remote == local, "the Ray run's result differs from the local run's"
            print(
                f"ray: {n}-call fan-out, 50 ms provider delay, concurrency 32: local {n / local_s:6.0f} calls/s "
                f"({local_s:.2f} s), Ray with 2 call runners {n / ray_s:6.0f} calls/s ({ray_s:.2f} s); results equal"
            )
            turns = 50
            local_s, local = await _calls(ONE_AT_A_TIME, turns, 0, 1, None)
            ray_s, remote = await _calls(ONE_AT_A_TIME, turns, 0, 1, cluster.executor(spec))
            assert remote == local
            print(
                f"ray: overhead per call {1000 * (ray_s - local_s) / turns:.1f} ms "
                f"({turns} calls one at a time, no delay: {1000 * local_s / turns:.1f} ms local, "
                f"{1000 * ray_s / turns:.1f} ms on Ray)"
            )
            first_s, _ = await _calls(ISOLATED_AT_A_TIME, 1, 0, 1, cluster.executor(spec_repo), repo)
            turns = 20
            local_s, local = await _calls(ISOLATED_AT_A_TIME, turns, 0, 1, None, repo)
            ray_s, remote = await _calls(ISOLATED_AT_A_TIME, turns, 0, 1, cluster.executor(spec_repo), repo)
            assert remote == local
            print(
                f"ray: a worktree call (made, run in and removed where it runs; {turns} one at a time, no "
                f"delay): {1000 * local_s / turns:.0f} ms local, {1000 * ray_s / turns:.0f} ms on Ray; the "
                f"first on Ray {first_s:.1f} s (its node's pinned runner starts)"
            )
            if address is None:
                print(
                    f"ray: the local cluster (2 CPUs, 2 call runners) started in {ready:.1f} s and holds "
                    f"{_descendants_rss_mb():.0f} MB resident"
                )

        asyncio.run(measure())
    finally:
        cluster.close()
        stack.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20, help="worker starts (and runs) per variant")
    parser.add_argument("--repeat", type=int, default=3, help="fan-out runs per store")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server to measure")
    parser.add_argument("--ray-calls", type=int, default=200, help="calls of the Ray fan-out (0: skip Ray)")
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster to measure")
    ns = parser.parse_args()
    if ns.starts > 0:
        sandbox_overhead(ns.starts)
    store_throughput(ns.repeat, ns.database_url)
    if ns.ray_calls > 0:
        ray_calls(ns.ray_calls, ns.ray_address)


if __name__ == "__main__":
    main()
