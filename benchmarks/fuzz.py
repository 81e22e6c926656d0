"""Mutation fuzzing of the loader and the realm, longer than the CI test. Prints the counts.

    python benchmarks/fuzz.py [--seconds N] [--seed N]

Target (security issue): 0 crashes, 0 hangs, 0 unnamed refusals, 0 load/validate disagreements and
0 escapes, over at least 5,000 mutants of the conformance and example workflows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzzing import fuzz, main_report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    opts = parser.parse_args()
    started = time.monotonic()
    report = fuzz(seed=opts.seed, budget_s=opts.seconds)
    elapsed = time.monotonic() - started
    print(f"fuzz seed {opts.seed}: {report.counts['mutants']:,} mutants in {elapsed:.0f} s")
    print(main_report(report))
    failures = report.failures
    print("failures: " + (", ".join(f"{k}={v}" for k, v in sorted(failures.items())) or "none"))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
