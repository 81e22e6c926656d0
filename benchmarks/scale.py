"""Scale-out benchmarks. Prints one line per figure.

    python benchmarks/scale.py [--starts N]

- realm worker start-up (spawn to ``hello``, then close), bare and under ``--sandbox bwrap``, median
  and 90th percentile of N starts each, and the sandbox's overhead;
- a whole one-call run through the engine, bare and sandboxed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workflow_mcp.realm.worker import RealmWorker

from helpers import run_async


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20, help="worker starts (and runs) per variant")
    ns = parser.parse_args()
    sandbox_overhead(ns.starts)


if __name__ == "__main__":
    main()
