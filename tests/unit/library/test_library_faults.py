"""Real faults (a full tmpfs, a read-only mount, a path that is not a directory, malformed metadata):
each is a typed error without an absolute path, and the workflows already there stay untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_mcp.errors import LibraryError
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.sqlite import SqliteStore

from library_kit import Places, source
from store_faults import fill_disk, read_only_mount, tiny_tmpfs


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


def test_a_full_disk_is_write_failed_without_a_path_and_keeps_the_existing_workflows(
    service: WorkflowService, places: Places
) -> None:
    places.workflows.mkdir(parents=True)
    with tiny_tmpfs(places.workflows, size="256k"):
        service.library.create(source("kept"), version="1.0.0")
        before = _snapshot(places.workflows)
        fill_disk(places.workflows)
        big = source("big", body="return '" + "x" * 200_000 + "'")
        with pytest.raises(LibraryError) as exc:
            service.library.create(big)
        assert exc.value.reason == "write_failed"
        assert "ENOSPC" in str(exc.value) and str(places.project) not in str(exc.value)
        (places.workflows / "filler").unlink()
        assert _snapshot(places.workflows) == {k: v for k, v in before.items() if k != "filler"}
        assert [v.name for v in service.library.store.versions()] == ["kept"]  # the failed one taken back


def test_a_full_state_database_refuses_the_create_before_the_file_is_written(
    places: Places, tmp_path: Path
) -> None:
    state = tmp_path / "tiny-state"
    with tiny_tmpfs(state, size="1m"):
        svc = WorkflowService(SqliteStore(state / "state.db"), cwd=str(places.project), home=str(places.home))
        try:
            svc.library.create(source("kept"))
            fill_disk(state)
            with pytest.raises(LibraryError) as exc:
                svc.library.create(source("other", body="return '" + "y" * 300_000 + "'"))
            assert exc.value.reason == "write_failed" and str(state) not in str(exc.value)
            assert sorted(p.name for p in places.workflows.iterdir()) == ["kept.js"]
        finally:
            svc.store.close()


def test_a_read_only_workflows_directory_is_write_failed(
    service: WorkflowService, places: Places, tmp_path: Path
) -> None:
    real = tmp_path / "real-workflows"
    real.mkdir()
    (real / "kept.js").write_text(source("kept"))
    places.workflows.parent.mkdir(parents=True)
    with read_only_mount(real, places.workflows):
        with pytest.raises(LibraryError) as exc:
            service.library.create(source("new"))
        assert exc.value.reason == "write_failed" and "EROFS" in str(exc.value)
        assert str(tmp_path) not in str(exc.value)
        assert service.library.store.versions() == []
    assert sorted(p.name for p in real.iterdir()) == ["kept.js"]


def test_a_workflows_path_that_cannot_be_read_as_a_directory_is_write_failed(
    service: WorkflowService, places: Places
) -> None:
    places.workflows.parent.mkdir(parents=True)
    places.workflows.write_text("not a directory")
    with pytest.raises(LibraryError) as exc:
        service.library.create(source("new"))
    assert exc.value.reason == "write_failed" and "ENOTDIR" in str(exc.value)
    assert places.workflows.read_text() == "not a directory"


@pytest.mark.parametrize(
    "meta",
    [
        "export const meta = { name: 'x', description: 1 + 1 }",
        "export const meta = { name: 'x' }",
        "export const meta = { name: 'x', description: 'd', ...other }",
        "const meta = { name: 'x', description: 'd' }",
    ],
)
def test_malformed_metadata_is_invalid_source_and_existing_workflows_stay(
    service: WorkflowService, places: Places, meta: str
) -> None:
    service.library.create(source("x", "the original"))
    before = _snapshot(places.workflows)
    with pytest.raises(LibraryError) as exc:
        service.library.create(f"{meta}\nreturn 1\n", version="2.0.0")
    assert exc.value.reason == "invalid_source" and exc.value.errors
    assert _snapshot(places.workflows) == before
    assert [v.version for v in service.library.store.versions()] == ["1.0.0"]


def test_a_sidecar_that_refuses_writes_is_write_failed_and_nothing_is_written(places: Places) -> None:
    from workflow_mcp.errors import StoreFullError
    from workflow_mcp.library import Library
    from workflow_mcp.store.library import MemoryLibraryStore

    side = MemoryLibraryStore()
    lib = Library(side, cwd=str(places.project), home=str(places.home))
    lib.create(source("kept"))
    lib.create_draft(source("plan"))
    side.fail_writes = StoreFullError("/somewhere/state.db", directory="/somewhere", free_bytes=0)
    for attempt in (
        lambda: lib.create(source("new")),
        lambda: lib.create_draft(source("plan", "again")),
        lambda: lib.prepare_delete("kept"),
    ):
        with pytest.raises(LibraryError) as exc:
            attempt()
        assert exc.value.reason == "write_failed" and "/somewhere" not in str(exc.value)
        assert "disk holding the state database is full" in str(exc.value)
    assert sorted(p.name for p in places.workflows.iterdir()) == ["kept.js"]
    side.fail_writes = None
    assert "again" not in lib.draft("plan@draft").source
