"""Validation cost of hostile but legal meta: many keys on one line, deep nesting. Prints the figures.

    python benchmarks/validate.py [--keys N] [--repeat N]

Target: a 20,000-key meta (277 KB on one line) validates in under 1 s; it took 60-73 s
while positions were computed by decoding the line prefix once per key (quadratic).
"""

from __future__ import annotations

import argparse
import statistics
import time

from workflow_mcp.definitions import get_profile, validate_workflow


def _time(source: str, repeat: int, *, check_syntax: bool) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        validate_workflow(source=source, check_syntax=check_syntax)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    cases = {
        "ascii keys": ", ".join(f"k{i}: {i}" for i in range(opts.keys)),
        "non-ASCII keys": ", ".join(f"'ké😀{i}': {i}" for i in range(opts.keys)),
        "nesting at the limit": "x: "
        + "[" * (get_profile().max_meta_depth - 1)
        + "]" * (get_profile().max_meta_depth - 1),
        "nesting 100,000 deep (refused)": "x: " + "{a:" * 100_000 + "1" + "}" * 100_000,
    }
    for name, entries in cases.items():
        source = f"export const meta = {{ name: 'n', description: 'd', {entries} }}\nreturn 1\n"
        size = len(source.encode("utf-8"))
        tree = _time(source, opts.repeat, check_syntax=False)
        full = _time(source, 1, check_syntax=True)  # the V8 check is cached after the first call
        print(
            f"{name:32s} {size / 1024:7.0f} KB  {tree * 1000:7.0f} ms (tree-sitter)  {full * 1000:7.0f} ms (with V8)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
