"""Durability benchmarks: replay speed, event persistence throughput, persistence overhead, and a
SIGKILL chaos loop. Prints one line per figure.

    python benchmarks/durability.py [--kills N] [--concurrent N] [--repeat N] [--only resume]

``--only resume`` prints only the resume ÷ fresh figure (median of at least 5 pairs, with the load
average the machine had meanwhile: the figure is a ratio of wall times, so a loaded machine blurs it).

Targets (durable-runs issue): replay of 1,000 cached calls ≤ 0.3 s with 0 provider calls; ≥ 20,000
events persisted per second during a 1,000-call fan-out; persistence overhead ≤ 1.5× on the
1,000-call engine benchmark; ``WorkflowService.resume`` of a run of 1,000 finished calls (its stored
source checked in the resumed run's own worker) ≤ 0.6× ``WorkflowService.start`` of the same run from
its file, both end to end and measured in this process (one-owner issue); ≥ 20 random SIGKILLs, each resumed with 0 completed results lost and
0 completed calls run twice. Robustness issue: rounds where every resume is started twice at once and
resumes are killed too — every second resume refused, 0 lost, 0 run twice, ``PRAGMA integrity_check``
ok after every round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workflow_mcp import FakeProvider, load_workflow, run_workflow
from workflow_mcp.engine.run import RunOptions
from workflow_mcp.events import Event
from workflow_mcp.service import ProviderChoice, WorkflowService
from workflow_mcp.store.sqlite import SqliteStore

from chaos import chaos_round

THOUSAND = (
    "export const meta = { name: 'thousand', description: '1,000 agents' }\n"
    "const r = await parallel(Array.from({ length: 1000 }, (_, i) => () => agent('n' + i)))\n"
    "return r.length\n"
)


async def plain_run() -> float:
    wf = load_workflow(source=THOUSAND)
    start = time.perf_counter()
    run = run_workflow(
        wf, provider=FakeProvider({"default": {"text": "ok"}}), options=RunOptions(concurrency=16)
    )
    await run.result()
    return time.perf_counter() - start


STORE_SECONDS = [0.0]


class TimedStore(SqliteStore):
    """Counts the time spent committing events (the store's own share of the run)."""

    def append_many(self, events: list[Event]) -> None:
        start = time.perf_counter()
        super().append_many(events)
        STORE_SECONDS[0] += time.perf_counter() - start


async def stored_run(db: Path, resume_from: str | None = None) -> tuple[float, str, int, int]:
    service = WorkflowService(TimedStore(db), cwd=str(db.parent))
    wf = load_workflow(source=THOUSAND)
    provider = FakeProvider({"default": {"text": "ok"}})
    start = time.perf_counter()
    handle = service.start_run(
        wf, provider=provider, options=RunOptions(concurrency=16, cwd=str(db.parent)), resume_from=resume_from
    )
    await handle.result()
    elapsed = time.perf_counter() - start
    events = len(handle.log.events)
    service.store.close()
    return elapsed, handle.run_id, events, len(provider.calls)


async def fresh_and_resumed(folder: Path, repeat: int) -> tuple[float, float, int]:
    """Median of ``repeat`` pairs of: ``service.start`` of the 1,000-call file (read, checked by V8 in
    the run's own worker, run, persisted), then ``service.resume`` of that run (stored source, limits
    and fake script restored, 1,000 calls replayed) in the same warm service. Returns both medians
    (seconds) and the resume's provider calls."""
    path = folder / "thousand.js"
    path.write_text(THOUSAND)
    service = WorkflowService(SqliteStore(folder / "resume.db"), cwd=str(folder))
    fresh: list[float] = []
    resumed: list[float] = []
    live_calls = 0
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            first = await service.start(
                str(path), provider=ProviderChoice("fake", {"default": {"text": "ok"}})
            )
            await first.result()
            fresh.append(time.perf_counter() - start)
            start = time.perf_counter()
            again = await service.resume(first.run_id)
            await again.result()
            resumed.append(time.perf_counter() - start)
            live_calls = sum(1 for e in again.log.events if e.type == "agent.started")
    finally:
        await service.shutdown()
        service.store.close()
    return statistics.median(fresh), statistics.median(resumed), live_calls


def print_resume_figure(folder: Path, repeat: int) -> None:
    load_before = os.getloadavg()[0]
    fresh, resumed, live = asyncio.run(fresh_and_resumed(folder, max(repeat, 5)))
    load = f"load average {load_before:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    print(
        f"fresh run of 1,000 calls (start):       {fresh * 1000:7.1f} ms  median of {max(repeat, 5)} "
        "(read, V8 check, run, persist)"
    )
    print(
        f"resume of 1,000 cached calls (resume):  {resumed * 1000:7.1f} ms  {resumed / fresh:.2f}x the fresh "
        f"run, provider calls {live} (target ≤ 0.6x, 0 calls; {load})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--concurrent", type=int, default=10, help="rounds with two resumes at once")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["resume"], help="print only this figure")
    ns = ap.parse_args()
    if ns.only == "resume":
        with tempfile.TemporaryDirectory() as tmp:
            print_resume_figure(Path(tmp), ns.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "state.db")
        plain = min(asyncio.run(plain_run()) for _ in range(ns.repeat))
        stored = []
        store_rates = []
        run_id = ""
        events = 0
        for _ in range(ns.repeat):
            STORE_SECONDS[0] = 0.0
            t, run_id, events, _calls = asyncio.run(stored_run(db))
            stored.append(t)
            store_rates.append(events / STORE_SECONDS[0])
        persisted = min(stored)
        print(f"1,000-call fan-out, in memory:          {plain * 1000:7.1f} ms")
        print(
            f"1,000-call fan-out, persisted (SQLite): {persisted * 1000:7.1f} ms  "
            f"overhead {persisted / plain:.2f}x (target ≤ 1.5x)"
        )
        print(
            f"events persisted per second (store):    {max(store_rates):9.0f}  "
            f"({events} events, committed in batches; target ≥ 20,000/s)"
        )
        print(
            f"events per second end to end:           {events / persisted:9.0f}  "
            "(engine + realm + store, one 1,000-call run)"
        )
        replays = [asyncio.run(stored_run(db, resume_from=run_id)) for _ in range(ns.repeat)]
        best = min(replays)
        print(
            f"replay of 1,000 cached calls:           {best[0] * 1000:7.1f} ms  "
            f"provider calls {best[3]} (target ≤ 300 ms, 0 calls)"
        )
        print_resume_figure(Path(tmp), ns.repeat)
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "7")))
    for label, rounds, concurrent in (("chaos", ns.kills, False), ("concurrent chaos", ns.concurrent, True)):
        lost = twice = kills = during = pairs = refused = both = intact = 0
        t0 = time.perf_counter()
        for i in range(rounds):
            with tempfile.TemporaryDirectory() as tmp:
                report = chaos_round(Path(tmp), rng, kills=3 if concurrent else 2, concurrent=concurrent)
            lost += report.lost
            twice += report.ran_twice
            kills += len(report.kill_times)
            during += report.kills_during_resume
            pairs += report.concurrent_resumes
            refused += report.refused
            both += report.both_ran
            intact += report.integrity == "ok"
            print(
                f"  {label} round {i + 1}: killed at {', '.join(f'{k:.2f}s' for k in report.kill_times)}; "
                f"{report.completed_before_kills} results kept, {report.provider_calls_total} provider calls "
                f"for {report.distinct_calls} distinct calls"
                + (
                    f", {report.refused}/{report.concurrent_resumes} second resumes refused"
                    if concurrent
                    else ""
                )
                + f", integrity {report.integrity}, result ok={report.result_ok}"
            )
        extra = (
            f"{pairs} resumes started twice at once, {refused} refused, {both} ran twice as a run; "
            if concurrent
            else ""
        )
        print(
            f"{label}: {rounds} rounds ({kills} SIGKILLs, {during} during a resume) in "
            f"{time.perf_counter() - t0:.1f} s: {extra}{lost} completed results lost, {twice} completed calls "
            f"run twice, integrity_check ok {intact}/{rounds} (target 0, 0, all)"
        )


if __name__ == "__main__":
    main()
