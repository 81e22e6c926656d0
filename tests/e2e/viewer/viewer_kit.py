"""Real processes for the run viewer tests: `workflow-mcp ui` and `workflow-mcp run` as a user starts
them, on one state directory, and headless Chromium (Debian's) driven by Playwright."""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent
WORKFLOW = HERE / "watch.js"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def env_for(home: Path) -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[3] / "src")
    return {
        **os.environ,
        "WORKFLOW_MCP_HOME": str(home),
        "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def read_line(
    proc: subprocess.Popen[str], stream: str, pattern: str, timeout_s: float = 30.0
) -> re.Match[str]:
    """The first line of ``proc``'s ``stream`` matching ``pattern`` (bounded by ``timeout_s``)."""
    pipe = getattr(proc, stream)
    sel = selectors.DefaultSelector()
    sel.register(pipe, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    seen = []
    while (left := deadline - time.monotonic()) > 0:
        if not sel.select(left):
            break
        line = pipe.readline()
        if not line:
            break
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no line matching {pattern!r} within {timeout_s} s; saw {seen!r}")


def fake_script(path: Path, *, slow_ms: int, build_ms: int = 1500) -> Path:
    rules = [
        {
            "match": {"label": "build:2"},
            "respond": {"fail": "error", "message": "compiler crashed", "delayMs": 400},
        },
        {
            "match": {"label": "build:*"},
            "respond": {"text": "built", "delayMs": build_ms, "tokens": {"input": 10, "output": 5}},
        },
        {
            "match": {"label": "check:*"},
            "respond": {"text": "ok", "delayMs": 600, "tokens": {"input": 7, "output": 3}},
        },
        {
            "match": {"label": "last"},
            "respond": {"text": "done", "delayMs": slow_ms, "tokens": {"input": 1, "output": 1}},
        },
    ]
    path.write_text(json.dumps({"rules": rules}))
    return path


@contextmanager
def ui_server(home: Path, *args: str) -> Iterator[str]:
    """``workflow-mcp ui --port 0 [args…]``; yields its sign-in URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "workflow_mcp.cli", "ui", "--port", "0", *args],
        env=env_for(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = read_line(proc, "stdout", r"^(http://\S+)$").group(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def started_run(home: Path, cwd: Path, script: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``workflow-mcp run watch.js --events none`` in the background; yields its run id (read from
    its stderr) and the process."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workflow_mcp.cli",
            "run",
            str(WORKFLOW),
            "--provider",
            "fake",
            "--fake-script",
            str(script),
            "--events",
            "none",
        ],
        env=env_for(home),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = read_line(proc, "stderr", r"run (run_\w+) started").group(1)
        yield run_id, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
