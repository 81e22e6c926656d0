"""The SQLite store under real faults: a full disk, the file-size limit, a read-only file or mount,
damaged pages, and file modes. Each failure is one clear StoreError subclass naming the path, the
failed write changes nothing, and everything stored stays readable."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workflow_mcp.errors import StoreCorruptError, StoreFullError, StoreReadOnlyError
from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore

from store_faults import (
    damage_event_pages,
    fill_disk,
    immutable,
    read_only_mount,
    runs_of_a_killed_owner,
    tiny_tmpfs,
)


def record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id, workflow_name="wf", source_hash="h", source="export const meta = {}", created_at=run_id
    )


def events(run_id: str, count: int, size: int = 100, start: int = 1) -> list[Event]:
    return [
        Event(run_id=run_id, sequence=i, type="log", payload={"message": "x" * size}, timestamp="t")
        for i in range(start, start + count)
    ]


def stored_run(store: SqliteStore, run_id: str, count: int = 3, size: int = 100) -> None:
    store.create_run(record(run_id))
    store.append_many(events(run_id, count, size))


def digest(path: Path) -> str:
    return hashlib.sha256(
        b"".join(Path(f"{path}{s}").read_bytes() for s in ("", "-wal") if Path(f"{path}{s}").exists())
    ).hexdigest()


# -- disk full, file-size limit ------------------------------------------------------------------


def test_a_full_disk_is_named_with_the_free_bytes_and_the_stored_runs_stay_readable(tmp_path: Path) -> None:
    with tiny_tmpfs(tmp_path / "small", "1m") as home:
        store = SqliteStore(home / "state.db")
        try:
            stored_run(store, "run_a")
            filler = fill_disk(home)
            with pytest.raises(StoreFullError) as caught:
                for n in range(200):  # a few batches at most: the file system has no room left
                    store.append_many(events("run_a", 20, 4000, start=4 + 20 * n))
            message = str(caught.value)
            assert "the disk is full (" in message and f"bytes free at {home})" in message
            assert "cannot rollback" not in message and str(home / "state.db") in message
            assert [e.sequence for e in store.events("run_a")][:3] == [1, 2, 3]
            assert [r.run_id for r in store.list_runs()] == ["run_a"]
            filler.unlink()
            last = store.last_sequence("run_a")
            store.append_many(events("run_a", 2, start=last + 1))  # space is back: writes work again
            assert store.last_sequence("run_a") == last + 2
        finally:
            store.close()


_LIMITED = textwrap.dedent(
    """
    import resource, signal, sys
    from workflow_mcp.errors import StoreFullError
    from workflow_mcp.events import Event
    from workflow_mcp.store import SqliteStore
    store = SqliteStore(sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
    try:
        for n in range(1000):
            store.append_many([Event(run_id="run_a", sequence=10 + 20 * n + i, type="log",
                payload={"message": "y" * 4000}, timestamp="t") for i in range(20)])
    except StoreFullError as exc:
        print(exc)
        print(len(store.events("run_a")))
    """
)


def test_reaching_the_file_size_limit_is_named_as_such(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    stored_run(store, "run_a")
    store.close()
    done = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(db)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    message, readable = done.stdout.splitlines()
    assert "the file-size limit was reached (262,144 bytes, `ulimit -f`)" in message
    assert int(readable) >= 3
    again = SqliteStore(db)
    try:
        assert [e.sequence for e in again.events("run_a")][:3] == [1, 2, 3]
    finally:
        again.close()


# -- read-only ---------------------------------------------------------------------------------


def test_an_immutable_database_is_read_and_every_write_says_why_not(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    stored_run(store, "run_a")
    store.close()
    with immutable(db):
        store = SqliteStore(db)
        try:
            assert [r.run_id for r in store.list_runs()] == ["run_a"]
            assert len(store.events("run_a")) == 3
            assert isinstance(store.write_problem(), StoreReadOnlyError)
            with pytest.raises(StoreReadOnlyError, match=f"the state database {db} is read-only"):
                store.create_run(record("run_b"))
            with pytest.raises(StoreReadOnlyError):
                store.append_many(events("run_a", 1, start=4))
        finally:
            store.close()


def test_a_database_on_a_read_only_mount_is_read_as_an_immutable_file(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    store = SqliteStore(folder / "state.db")
    stored_run(store, "run_a")
    store.close()
    with read_only_mount(folder, tmp_path / "ro") as ro:
        store = SqliteStore(ro / "state.db")
        try:
            assert len(store.events("run_a")) == 3
            with pytest.raises(StoreReadOnlyError, match="read-only"):
                store.request_cancel("run_a", "no")
        finally:
            store.close()
        assert sorted(p.name for p in ro.iterdir()) == ["state.db"]


# -- damage ------------------------------------------------------------------------------------


def damaged_store(tmp_path: Path) -> Path:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    stored_run(store, "run_a", count=400, size=300)  # the oldest run: many leaf pages of its own
    stored_run(store, "run_b", count=3)
    store.close()
    damage_event_pages(db, share=0.4)
    return db


def test_damaged_pages_are_detected_marked_and_nothing_more_is_written(tmp_path: Path) -> None:
    db = damaged_store(tmp_path)
    store = SqliteStore(db)
    try:
        with pytest.raises(StoreCorruptError) as caught:
            store.events("run_a")
        message = str(caught.value)
        assert f"the state database {db} is damaged" in message
        assert "workflow-mcp runs export" in message and "workflow-mcp store repair" in message
        assert (tmp_path / "state.db.damaged").exists()
        before = digest(db)
        with pytest.raises(StoreCorruptError):
            store.create_run(record("run_c"))
        assert len(store.events("run_b")) == 3  # what is intact stays readable
    finally:
        store.close()
    again = SqliteStore(db)  # another process: the mark stops it writing too
    try:
        assert isinstance(again.write_problem(), StoreCorruptError)
        with pytest.raises(StoreCorruptError):
            again.create_run(record("run_c"))
    finally:
        again.close()
    assert digest(db) == before


def test_after_an_unclean_shutdown_opening_runs_a_quick_check_that_finds_the_damage(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    stored_run(store, "run_a", count=400, size=300)
    store.close()
    runs_of_a_killed_owner(db, 1)  # an owner that never closed the file: its row stays
    damage_event_pages(db, share=0.4)
    store = SqliteStore(db)
    try:
        problem = store.write_problem()
        assert isinstance(problem, StoreCorruptError) and "quick_check" in problem.detail
    finally:
        store.close()


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    db.write_bytes(b"not a database" * 400)
    with pytest.raises(StoreCorruptError, match="left untouched"):
        SqliteStore(db)
    assert db.read_bytes() == b"not a database" * 400


# -- modes -------------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_home_is_0700_and_the_database_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    old = os.umask(0)
    try:
        store = SqliteStore(home / "state.db")
        stored_run(store, "run_a")  # the -wal and -shm exist while the store is open
        try:
            assert mode(home) == 0o700
            for name in ("state.db", "state.db-wal", "state.db-shm"):
                assert mode(home / name) == 0o600, name
        finally:
            store.close()
    finally:
        os.umask(old)


def test_looser_modes_left_by_an_older_release_are_tightened_on_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = SqliteStore(home / "state.db")
    stored_run(store, "run_a")
    store.close()
    os.chmod(home, 0o755)
    os.chmod(home / "state.db", 0o644)
    again = SqliteStore(home / "state.db")
    try:
        assert (mode(home), mode(home / "state.db")) == (0o700, 0o600)
        assert again.notices == []
    finally:
        again.close()


def test_a_shared_directory_is_left_alone_and_reported(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    store = SqliteStore(shared / "state.db")
    try:
        assert mode(shared) == 0o1777
        assert mode(shared / "state.db") == 0o600
        assert len(store.notices) == 1 and "readable by other users" in store.notices[0]
    finally:
        store.close()
