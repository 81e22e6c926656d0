"""A library delete racing a create of the same workflow from a second process: both wait on the
library's lock (held by the test until the kernel shows both waiting), then run in whichever order
they get it; either order leaves the file and the catalog agreeing, and a delete that came second is
refused as ``target_changed`` without removing the new version. Real processes, a real state file."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

from test_cli import CLI, write

V1 = "export const meta = { name: 'deploy', description: 'Ship it' }\nreturn 1\n"
V2 = "export const meta = { name: 'deploy', description: 'Ship it again' }\nreturn 2\n"
WAIT_S = 60


def _start(root: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CLI, "library", *argv],
        cwd=root,
        env={**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _waiters(lock: Path) -> int:
    """How many processes the kernel shows blocked on the ``flock`` of ``lock`` (``/proc/locks``)."""
    inode = os.stat(lock).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and line.split()[-3].endswith(f":{inode}"))


def test_a_delete_and_a_create_from_two_processes_leave_the_file_and_catalog_agreeing(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()
    (root / "home").mkdir()
    first = subprocess.run(
        [CLI, "library", "create", str(write(root / "v1.js", V1)), "--version", "1.0.0"],
        cwd=root,
        env={**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert first.returncode == 0, first.stderr
    lock = root / "state" / "library.lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # both processes below meet it
        deleting = _start(root, "delete", "deploy", "--yes", "--json")
        creating = _start(root, "create", str(write(root / "v2.js", V2)), "--version", "2.0.0", "--json")
        deadline = time.monotonic() + WAIT_S
        while _waiters(lock) < 2:  # bounded: both are waiting for the lock, not merely started
            assert time.monotonic() < deadline, "the two processes never both waited for the lock"
            assert deleting.poll() is None and creating.poll() is None, (
                deleting.communicate(),
                creating.communicate(),
            )
    finally:
        os.close(fd)  # releases the lock: they race for it now
    deleted_out, deleted_err = deleting.communicate(timeout=WAIT_S)
    created_out, created_err = creating.communicate(timeout=WAIT_S)
    assert json.loads(created_out)["file"] == ".claude/workflows/deploy.js"
    assert creating.returncode == 0, created_err
    assert "Traceback" not in deleted_err + created_err
    described = subprocess.run(
        [CLI, "library", "describe", "deploy", "--json"],
        cwd=root,
        env={**os.environ, "WORKFLOW_MCP_HOME": str(root / "state"), "HOME": str(root / "home")},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    row = json.loads(described.stdout)
    assert (root / ".claude" / "workflows" / "deploy.js").read_text() == V2  # the new version, whole
    assert row["version"] == "2.0.0" and row["current"] and row["source"] == V2
    if deleting.returncode == 0:  # the delete went first: it removed version 1 and its file
        assert json.loads(deleted_out)["version"] == "1.0.0" and row["versions"] == ["2.0.0"]
    else:  # the create went first: the delete saw another source and removed nothing
        assert deleting.returncode == 1 and "[target_changed]" in deleted_err, deleted_err
        assert row["versions"] == ["2.0.0", "1.0.0"]
