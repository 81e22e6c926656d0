"""A few SIGKILL chaos rounds in CI (the benchmark runs 20+): no completed result is lost and no
completed call runs twice — also when every resume is started twice at once and resumes are killed."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos import chaos_round


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_run_killed_twice_with_sigkill_resumes_without_losing_or_repeating_a_completed_call(
    tmp_path: Path, seed: int
) -> None:
    report = chaos_round(tmp_path, random.Random(seed), kills=2)
    assert report.result_ok, report
    assert report.lost == 0, report
    assert report.ran_twice == 0, report
    assert report.kill_times and len(report.runs) == len(report.kill_times) + 1  # killed…, completed
    assert report.completed_before_kills > 0
    assert report.integrity == "ok", report


@pytest.mark.parametrize("seed", [4, 5])
def test_concurrent_resumes_of_killed_runs_run_each_call_once_and_refuse_the_second_resume(
    tmp_path: Path, seed: int
) -> None:
    report = chaos_round(tmp_path, random.Random(seed), kills=3, concurrent=True)
    assert report.result_ok, report
    assert (report.lost, report.ran_twice, report.both_ran) == (0, 0, 0), report
    assert report.concurrent_resumes >= 3 and report.refused == report.concurrent_resumes, report
    assert report.kills_during_resume >= 1, report
    assert report.integrity == "ok", report
