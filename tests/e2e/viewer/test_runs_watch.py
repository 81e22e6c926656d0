"""`workflow-mcp runs watch` under a pseudo-terminal, `runs events --follow` and `runs list`, against a
run another `workflow-mcp run` process executes (real processes, one state directory)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from viewer_kit import WORKFLOW, env_for, fake_script, started_run

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
BOUND_S = 40.0


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workflow_mcp.cli", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )


def screen_until(fd: int, proc: subprocess.Popen[bytes], needle: str) -> tuple[str, list[str]]:
    """Everything the program wrote to its terminal until it exited (bounded), ANSI codes removed, and
    the frames seen while ``needle`` was on screen."""
    out = b""
    frames: list[str] = []
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the program closed the terminal
                break
            if not chunk:
                break
            out += chunk
            text = ANSI.sub("", chunk.decode("utf-8", "replace"))
            if needle in text:
                frames.append(text)
        elif proc.poll() is not None:
            break
    return ANSI.sub("", out.decode("utf-8", "replace")), frames


def test_runs_watch_shows_phases_running_agents_with_a_clock_the_queue_logs_tokens_and_the_end(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    script = fake_script(tmp_path / "fake.json", slow_ms=4000)
    with started_run(home, tmp_path, script) as (run_id, run):
        main, side = pty.openpty()
        os.set_blocking(main, True)
        watch = subprocess.Popen(
            [sys.executable, "-m", "workflow_mcp.cli", "runs", "watch", run_id],
            env={**env_for(home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"},
            stdin=side,
            stdout=side,
            stderr=side,
            close_fds=True,
        )
        os.close(side)
        try:
            screen, running_frames = screen_until(main, watch, "Running")
            assert watch.wait(BOUND_S) == 0
        finally:
            os.close(main)
            if watch.poll() is None:
                watch.kill()
        assert run.wait(BOUND_S) == 0
    assert "watch-me" in screen and run_id in screen
    assert re.search(r"Build\s+\S+.*3/3", screen) and re.search(r"Check\s+\S+.*3/3", screen)
    # While agents ran, the table named them with a clock in seconds.
    assert running_frames  # the Running table was on screen while agents ran…
    # …naming them with a clock in seconds that went on between their events.
    clocks = [float(m[1]) for m in re.finditer(r"\blast\s+Check\s+(\d+\.\d) s", screen)]
    assert len(set(clocks)) >= 3 and clocks == sorted(clocks)
    assert "queued:" in screen and "tokens: 35 in / 17 out" in screen
    assert "built 2 of 3" in screen
    assert screen.rstrip().endswith("run completed") or "run completed" in screen.splitlines()[-1]


def test_run_on_a_terminal_shows_the_same_live_view_and_its_result(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = fake_script(tmp_path / "fake.json", slow_ms=1500, build_ms=800)
    main, side = pty.openpty()
    run = subprocess.Popen(
        [sys.executable, "-m", "workflow_mcp.cli", "run", str(WORKFLOW), "--provider", "fake", "--fake-script",
         str(script)],
        env={**env_for(home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "60"},
        cwd=tmp_path, stdin=side, stdout=side, stderr=side, close_fds=True,
    )  # fmt: skip
    os.close(side)
    try:
        screen, running_frames = screen_until(main, run, "Running")
        assert run.wait(BOUND_S) == 0
    finally:
        os.close(main)
        if run.poll() is None:
            run.kill()
    assert running_frames and re.search(r"\blast\s+Check\s+\d+\.\d s", screen)
    assert re.search(r"Build\s+completed.*3/3", screen) and "run completed" in screen
    assert "tokens: 35 in / 17 out" in screen
    assert '"last": "done"' in screen  # the value, printed when the run ends


def test_runs_events_follow_prints_every_event_once_until_the_run_ends(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = fake_script(tmp_path / "fake.json", slow_ms=800, build_ms=500)
    with started_run(home, tmp_path, script) as (run_id, run):
        followed = cli(home, "runs", "events", run_id, "--follow", "--json")
        assert run.wait(BOUND_S) == 0
    assert followed.returncode == 0, followed.stderr
    events = [json.loads(line) for line in followed.stdout.splitlines()]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "run.completed"
    tail = cli(home, "runs", "events", run_id, "--follow", "--after", str(len(events) - 1))
    assert tail.returncode == 0 and tail.stdout.count("\n") == 1 and "run.completed" in tail.stdout


def test_runs_list_has_a_header_row_and_a_provider_column(tmp_path: Path) -> None:
    home = tmp_path / "home"
    script = fake_script(tmp_path / "fake.json", slow_ms=10, build_ms=10)
    with started_run(home, tmp_path, script) as (run_id, run):
        assert run.wait(BOUND_S) == 0
    listed = cli(home, "runs", "list")
    lines = listed.stdout.splitlines()
    assert lines[0].split("\t") == ["RUN", "STATUS", "WORKFLOW", "PROVIDER", "CREATED"]
    assert lines[1].split("\t")[:4] == [run_id, "completed", "watch-me", "fake"]


def test_watching_or_following_an_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    for args in (("runs", "watch", "run_nope"), ("runs", "events", "run_nope", "--follow")):
        done = cli(tmp_path / "home", *args)
        assert done.returncode == 2 and "no stored run 'run_nope'" in done.stderr
        assert "Traceback" not in done.stderr
