"""The library-store contract (``store.base.LibraryStore``), run against every implementation: the
SQLite tables of migration 4, the PostgreSQL ones (a fresh schema of the session's real server) and the
in-memory twin. Across stores on one PostgreSQL database — several servers — the same rules hold."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from workflow_mcp.store.base import DeleteConfirmation, LibraryDraft, LibraryStore, LibraryVersion
from workflow_mcp.store.library import (
    MemoryLibraryStore,
    PostgresLibraryStore,
    SqliteLibraryStore,
    library_store_for,
)
from workflow_mcp.store.memory import MemoryStore
from workflow_mcp.store.sqlite import SqliteStore


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def library_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LibraryStore]:
    if request.param == "memory":
        yield MemoryLibraryStore()
        return
    if request.param == "postgres":
        from workflow_mcp.store.postgres import PostgresStore

        pg = PostgresStore(request.getfixturevalue("postgres_url"))
        try:
            yield PostgresLibraryStore(pg)
        finally:
            pg.close()
        return
    store = SqliteStore(tmp_path / "state.db")
    try:
        yield SqliteLibraryStore(store)
    finally:
        store.close()


@pytest.fixture
def two_servers(postgres_url: str) -> Iterator[tuple[LibraryStore, LibraryStore]]:
    """The library stores of two PostgreSQL stores on one database (two servers' connections)."""
    from workflow_mcp.store.postgres import PostgresStore

    a, b = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        yield library_store_for(a), library_store_for(b)
    finally:
        a.close()
        b.close()


def _version(version: str = "1.0.0", **changes: object) -> LibraryVersion:
    base = LibraryVersion(
        root="/p/.claude/workflows",
        name="deploy",
        version=version,
        file="deploy.js",
        source=f"// {version}",
        source_hash=f"h{version}",
        tags=("ops", "Prod"),
        category="release",
        author="ana",
        fields={"team": "core", "n": 3},
        created_at=f"2026-12-01T00:00:0{len(version) % 10}.000Z",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def _draft(**changes: object) -> LibraryDraft:
    base = LibraryDraft(
        draft_id="draft_1",
        root="/p/.claude/workflows",
        name="deploy",
        source="// draft",
        source_hash="hd",
        tags=("wip",),
        owner="http:alice",
        created_at="2026-12-01T00:00:00.000Z",
        updated_at="2026-12-01T00:00:00.000Z",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_stored_version_comes_back_with_every_field(library_store: LibraryStore) -> None:
    entry = _version()
    assert library_store.add_version(entry) is True
    assert library_store.versions() == [entry]
    assert library_store.versions("/p/.claude/workflows", "deploy") == [entry]
    assert library_store.versions("/other", "deploy") == []
    assert library_store.versions(name="other") == []


def test_adding_a_stored_name_and_version_again_stores_nothing(library_store: LibraryStore) -> None:
    assert library_store.add_version(_version()) is True
    assert library_store.add_version(_version(source="// other", source_hash="x")) is False
    assert [v.source for v in library_store.versions()] == ["// 1.0.0"]
    # the same name and version in another directory is another workflow
    assert library_store.add_version(_version(root="/q/.claude/workflows")) is True


def test_of_concurrent_adds_of_one_key_exactly_one_wins(library_store: LibraryStore) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def add(i: int) -> None:
        barrier.wait(timeout=10)
        results.append(library_store.add_version(_version(source=f"// {i}")))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == [False] * 7 + [True]
    assert len(library_store.versions()) == 1


def test_removing_a_version_forgets_only_that_version(library_store: LibraryStore) -> None:
    library_store.add_version(_version("1.0.0"))
    library_store.add_version(_version("1.1.0"))
    assert library_store.remove_version("/p/.claude/workflows", "deploy", "1.0.0") is True
    assert library_store.remove_version("/p/.claude/workflows", "deploy", "1.0.0") is False
    assert [v.version for v in library_store.versions()] == ["1.1.0"]


def test_overwriting_a_draft_keeps_its_id_and_creation_date(library_store: LibraryStore) -> None:
    first, new = library_store.put_draft(_draft())
    assert new is True and first == _draft()
    second, new = library_store.put_draft(
        _draft(draft_id="draft_2", source="// v2", source_hash="h2", created_at="2026-12-02T00:00:00.000Z",
               updated_at="2026-12-02T00:00:00.000Z")
    )  # fmt: skip
    assert new is False
    assert (second.draft_id, second.created_at, second.source) == (
        "draft_1",
        "2026-12-01T00:00:00.000Z",
        "// v2",
    )
    assert second.updated_at == "2026-12-02T00:00:00.000Z"
    assert library_store.drafts() == [second]
    assert library_store.get_draft("draft_1") == second
    assert library_store.get_draft("draft_2") is None


def test_drafts_are_one_per_name_and_directory(library_store: LibraryStore) -> None:
    library_store.put_draft(_draft())
    library_store.put_draft(_draft(draft_id="draft_2", name="other"))
    library_store.put_draft(_draft(draft_id="draft_3", root="/personal"))
    assert sorted(d.draft_id for d in library_store.drafts()) == ["draft_1", "draft_2", "draft_3"]
    assert [d.draft_id for d in library_store.drafts("/personal")] == ["draft_3"]
    assert library_store.remove_draft("draft_2") is True
    assert library_store.remove_draft("draft_2") is False


def test_a_confirmation_can_be_taken_once(library_store: LibraryStore) -> None:
    c = DeleteConfirmation("t1", "/p", "deploy", "h", 123.5, version="1.0.0", file="deploy.js")
    library_store.add_confirmation(c)
    assert library_store.take_confirmation("nope") is None
    assert library_store.take_confirmation("t1") == c
    assert library_store.take_confirmation("t1") is None


def test_the_library_store_beside_a_sqlite_store_shares_its_database(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    try:
        assert isinstance(library_store_for(store), SqliteLibraryStore)
        library_store_for(store).add_version(_version())
    finally:
        store.close()
    again = SqliteStore(tmp_path / "state.db")
    try:
        assert [v.name for v in library_store_for(again).versions()] == ["deploy"]
    finally:
        again.close()
    assert isinstance(library_store_for(MemoryStore()), MemoryLibraryStore)


def test_the_library_store_beside_a_postgres_store_shares_its_database(postgres_url: str) -> None:
    from workflow_mcp.store.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    try:
        side = library_store_for(store)
        assert isinstance(side, PostgresLibraryStore)
        side.add_version(_version())
        side.put_draft(_draft())
    finally:
        store.close()
    again = PostgresStore(postgres_url)  # a restart: nothing was kept in memory
    try:
        assert library_store_for(again).versions() == [_version()]
        assert library_store_for(again).drafts() == [_draft()]
    finally:
        again.close()


def test_of_concurrent_adds_of_one_key_on_two_servers_exactly_one_wins(
    two_servers: tuple[LibraryStore, LibraryStore],
) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def add(i: int) -> None:
        barrier.wait(timeout=10)
        results.append(two_servers[i % 2].add_version(_version(source=f"// {i}")))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == [False] * 7 + [True]
    a, b = two_servers
    assert a.versions() == b.versions() and len(a.versions()) == 1


def test_a_confirmation_issued_on_one_server_is_taken_once_across_servers(
    two_servers: tuple[LibraryStore, LibraryStore],
) -> None:
    a, b = two_servers
    a.add_confirmation(DeleteConfirmation("t1", "/p", "deploy", "h", 123.5, draft_id="draft_1"))
    taken: list[DeleteConfirmation | None] = []
    barrier = threading.Barrier(6)

    def take(i: int) -> None:
        barrier.wait(timeout=10)
        taken.append((a, b)[i % 2].take_confirmation("t1"))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(taken) == 6
    assert [c.draft_id for c in taken if c is not None] == ["draft_1"]


def test_concurrent_first_drafts_of_one_name_on_two_servers_leave_one_draft(
    two_servers: tuple[LibraryStore, LibraryStore],
) -> None:
    outcomes: list[tuple[LibraryDraft, bool]] = []
    barrier = threading.Barrier(6)

    def put(i: int) -> None:
        barrier.wait(timeout=10)
        outcomes.append(two_servers[i % 2].put_draft(_draft(draft_id=f"draft_{i}", source=f"// {i}")))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(new for _, new in outcomes) == [False] * 5 + [True]
    (kept,) = two_servers[1].drafts()
    # every writer was told the one id the draft kept
    assert {d.draft_id for d, _ in outcomes} == {kept.draft_id}
