"""``store repair`` on a full disk (a real tiny tmpfs): whether the backup or the rebuilt file does not
fit, the repair is refused naming the disk and the free bytes, the database is left exactly as it was
with no partial backup or rebuilt file beside it (never a rebuilt file with runs left out), and the
repair works once space is back."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from workflow_mcp.errors import StoreFullError
from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord, SqliteStore
from workflow_mcp.store.salvage import repair_store

from store_faults import fill_disk, tiny_tmpfs

SIDE = ("state.db-wal", "state.db-shm")


def _fill(db: Path, runs: int, events: int) -> None:
    store = SqliteStore(db)
    try:
        for n in range(runs):
            run_id = f"run_{n}"
            store.create_run(
                RunRecord(run_id=run_id, workflow_name="wf", source_hash="h", source="x", created_at=run_id)
            )
            store.append_many(
                [Event(run_id, 1, "run.started", timestamp="t")]
                + [Event(run_id, i, "log", {"message": "x" * 1000}, timestamp="t") for i in range(2, events)]
            )
    finally:
        store.close()


def _state(folder: Path) -> tuple[str, list[str]]:
    """The database file's digest, and every file beside it but SQLite's own side files."""
    others = sorted(p.name for p in folder.iterdir() if p.name not in ("filler", *SIDE))
    return hashlib.sha256((folder / "state.db").read_bytes()).hexdigest(), others


@pytest.mark.parametrize("short_of", ["backup", "rebuilt"])
def test_a_repair_that_does_not_fit_is_refused_naming_the_disk_and_changes_nothing(
    tmp_path: Path, short_of: str
) -> None:
    with tiny_tmpfs(tmp_path / "state", "8m") as home:
        db = home / "state.db"
        _fill(db, runs=10, events=20)
        before = _state(home)
        assert before[1] == ["state.db"]
        size = sum(p.stat().st_size for p in home.iterdir())
        filler = fill_disk(home, leave=0 if short_of == "backup" else size + 64 * 1024)
        with pytest.raises(StoreFullError) as exc:
            repair_store(db)
        message = str(exc.value)
        assert f"bytes free at {home})" in message and "`workflow-mcp store repair`" in message
        assert _state(home) == before  # the database untouched, nothing half-made beside it
        filler.unlink()
        report = repair_store(db)
        assert (report.runs, report.events) == (10, 190) and report.backup.exists()
