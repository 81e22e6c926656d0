"""Bounded mutation fuzzing of the loader and the realm (``benchmarks/fuzz.py`` runs it longer).

0 crashes, 0 hangs, every refusal names its rule and line, ``load`` agrees with ``validate``, and no
file validate accepts reaches a host object when it runs.
"""

from __future__ import annotations

import pytest

from fuzzing import fuzz, main_report


@pytest.mark.timeout(120)
def test_mutated_workflows_never_crash_hang_escape_or_go_unexplained() -> None:
    report = fuzz(seed=20261201, budget_s=45.0)
    assert report.counts["mutants"] >= 400, main_report(report)
    assert report.counts["ran"] + report.counts["run-failed"] >= 20, main_report(report)
    assert report.failures == {}, main_report(report)
