"""Real faults for the store tests: a tiny file system, an immutable file, a read-only mount, a
file-size limit, damaged pages, and runs whose owner was SIGKILLed. Nothing is simulated: each uses
the kernel facility it names, and skips (with the reason) where the sandbox does not allow it.

Imported as ``store_faults`` (the test folders' ``conftest.py`` put ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = [
    "damage_event_pages",
    "file_size_limit",
    "fill_disk",
    "immutable",
    "read_only_mount",
    "runs_of_a_killed_owner",
    "tiny_tmpfs",
]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def tiny_tmpfs(where: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (skips when mounting is not permitted)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or mounted.returncode})")
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


def fill_disk(folder: Path, leave: int = 0) -> Path:
    """Write a filler file in ``folder`` until the file system has at most ``leave`` bytes free."""
    filler = folder / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb") as f:
        while True:
            st = os.statvfs(folder)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(chunk[: max(1, min(len(chunk), free - leave))])
                f.flush()
            except OSError:
                break
    return filler


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``chattr +i path`` for the duration (root cannot write it either); skips where unsupported."""
    done = _run("chattr", "+i", str(path))
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not supported here ({done.stderr.strip() or done.returncode})")
    try:
        yield path
    finally:
        _run("chattr", "-i", str(path))


@contextlib.contextmanager
def read_only_mount(folder: Path, at: Path) -> Iterator[Path]:
    """``folder`` bind-mounted read-only at ``at`` (skips when mounting is not permitted)."""
    at.mkdir(parents=True, exist_ok=True)
    bound = _run("mount", "--bind", str(folder), str(at))
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({bound.stderr.strip() or bound.returncode})")
    try:
        ro = _run("mount", "-o", "remount,ro,bind", str(at))
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here ({ro.stderr.strip()})")
        yield at
    finally:
        _run("umount", "-l", str(at))


def file_size_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` that sets ``RLIMIT_FSIZE`` to ``limit`` bytes and ignores ``SIGXFSZ`` (so a
    write past the limit fails with ``EFBIG`` instead of killing the process)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def damage_event_pages(db_path: Path, *, share: float = 0.5, seed: int = 9) -> list[int]:
    """Overwrite with random bytes the first ``share`` of the ``events`` table's leaf pages in key
    order (so the oldest run's events; its root and interior pages stay intact, so SQLite reaches the
    damage only when it reads those events). Returns the damaged page numbers. The database must be
    closed (checkpointed) first."""
    db = sqlite3.connect(db_path)
    try:
        page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
        try:
            rows = db.execute(
                "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY path"
            ).fetchall()
            pages = [int(r[0]) for r in rows]
        except sqlite3.OperationalError:  # no dbstat in this SQLite: take a middle part of the file
            count = int(db.execute("PRAGMA page_count").fetchone()[0])
            pages = list(range(count // 4, count // 2))
    finally:
        db.close()
    chosen = pages[: max(1, int(len(pages) * share))]
    rng = random.Random(seed)
    with db_path.open("r+b") as f:
        for page in chosen:
            f.seek((page - 1) * page_size)
            f.write(bytes(rng.getrandbits(8) for _ in range(page_size)))
    return chosen


_KILLED_OWNER = textwrap.dedent(
    """
    import os, signal, sys
    from workflow_mcp.events import Event, utc_now
    from workflow_mcp.store import RunRecord, SqliteStore
    store = SqliteStore(sys.argv[1])
    for i in range(int(sys.argv[2])):
        run_id = f"run_killed_{i:03d}"
        store.create_run(RunRecord(run_id=run_id, workflow_name="wf", source_hash="h",
            source="export const meta = {}", created_at=utc_now(), owner_pid=os.getpid(),
            owner_host=os.uname().nodename))
        store.append(Event(run_id=run_id, sequence=1, type="run.started", timestamp=utc_now()))
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def runs_of_a_killed_owner(db_path: Path, count: int) -> list[str]:
    """Create ``count`` runs left ``running`` by a process that is then SIGKILLed (and reaped)."""
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_OWNER, str(db_path), str(count)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL and "ready" in proc.stdout, proc.stderr
    return [f"run_killed_{i:03d}" for i in range(count)]
