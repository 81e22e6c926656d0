"""What the PostgreSQL store adds to the shared store contract (test_sqlite.py and test_claims.py run
that contract over it too): its schema and migrations, several stores — several servers — on one
database (one executor per run, leases, idempotency keys), and clear errors for an unreachable or
lost server. Every test runs against the session's real PostgreSQL server, each in a fresh schema."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from workflow_mcp.errors import ClaimLostError, RunClaimedError, SequenceConflictError, StoreError
from workflow_mcp.events import Event
from workflow_mcp.store import LEASE_TTL_S, RunRecord, open_store
from workflow_mcp.store.postgres import PostgresStore, migrations, redact

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'")

BOUND_S = 30
TABLES = [
    "artifacts",
    "cancel_requests",
    "events",
    "journal",
    "library_confirmations",
    "library_drafts",
    "library_versions",
    "owners",
    "run_claims",
    "runs",
    "workflow_mcp_schema",
]


def record(run_id: str, **fields: object) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow_name="wf",
        source_hash="h",
        source="export const meta = {}",
        created_at=f"2026-11-30T10:00:00.{len(run_id):03d}Z",
        **fields,  # type: ignore[arg-type]
    )


def ev(run_id: str, seq: int, type: str, **payload: object) -> Event:
    return Event(
        run_id=run_id, sequence=seq, type=type, timestamp="2026-11-30T10:00:00.000Z", payload=payload
    )


def interrupted(rec: RunRecord, sequence: int, reason: str) -> Event:
    return Event(run_id=rec.run_id, sequence=sequence, type="run.interrupted", payload={"reason": reason})


def test_a_new_database_is_at_the_newest_migration_with_exactly_the_stores_tables(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        assert store.schema_version() == migrations()[-1][0] == 5
        assert store.tables() == TABLES
    finally:
        store.close()


def test_the_migrations_are_numbered_like_the_sqlite_stores() -> None:
    from workflow_mcp.store.sqlite import migrations as sqlite_migrations

    ours = [n for n, _ in migrations()]
    assert ours == list(range(1, len(ours) + 1))
    # Each PostgreSQL migration is its SQLite namesake's twin (a newer SQLite one may await its own).
    assert [n for n, _ in sqlite_migrations()][: len(ours)] == ours


def test_servers_opening_a_fresh_database_at_once_migrate_it_once(postgres_url: str) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(PostgresStore(postgres_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND_S)
    try:
        assert errors == []
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT count(*), max(version) FROM workflow_mcp_schema").fetchone() == (
                1,
                migrations()[-1][0],
            )
    finally:
        for s in stores:
            s.close()


def test_a_database_at_migration_3_gains_the_library_tables_and_owner_leases_keeping_its_runs(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    store.create_run(record("run_1"))
    store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as migration 3 left it
        for table in ("library_confirmations", "library_drafts", "library_versions"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE owners DROP COLUMN lease_s")
        conn.execute("UPDATE workflow_mcp_schema SET version = 3")
    again = PostgresStore(postgres_url)
    try:
        assert again.schema_version() == migrations()[-1][0] == 5
        assert again.tables() == TABLES
        assert [r.run_id for r in again.list_runs()] == ["run_1"]
    finally:
        again.close()


def test_a_database_from_a_newer_release_is_refused_naming_both_versions(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE workflow_mcp_schema SET version = 99")
    newest = migrations()[-1][0]
    with pytest.raises(
        StoreError, match=f"schema version 99, newer than this release understands \\({newest}\\)"
    ):
        PostgresStore(postgres_url)
    with psycopg.connect(postgres_url) as conn:  # refused, never modified
        assert conn.execute("SELECT version FROM workflow_mcp_schema").fetchone() == (99,)


def test_an_unreachable_server_is_a_store_error_naming_it_without_the_password() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://me:hunter2@127.0.0.1:{port}/runs"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert f"postgresql://me@127.0.0.1:{port}/runs cannot be reached" in message
    assert "hunter2" not in message
    assert redact(url) == f"postgresql://me@127.0.0.1:{port}/runs"


def test_a_url_that_is_not_postgresql_is_refused_naming_the_accepted_form() -> None:
    with pytest.raises(StoreError, match="is not a PostgreSQL URL: give postgresql://USER@HOST:PORT/DB"):
        open_store("mysql://me:secret@db/runs")


def test_a_lost_connection_fails_one_call_clearly_and_the_next_reconnects(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.create_run(record("run_1"))
        pid = store._conn.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError, match="went away while reading run run_1"):
            store.get_run("run_1")
        got = store.get_run("run_1")
        assert got is not None and got.run_id == "run_1"
    finally:
        store.close()


def test_an_idempotency_key_is_unique_across_servers_with_or_without_an_owner(postgres_url: str) -> None:
    a, b = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        a.create_run(record("run_a", idempotency_key="k", owner="alice"))
        with pytest.raises(StoreError, match="refused by the store"):
            b.create_run(record("run_b", idempotency_key="k", owner="alice"))
        b.create_run(record("run_c", idempotency_key="k", owner="bob"))  # another owner's key
        a.create_run(record("run_d", idempotency_key="anon"))
        with pytest.raises(StoreError, match="refused by the store"):
            b.create_run(record("run_e", idempotency_key="anon"))
        found = b.find_idempotent(None, "anon")
        assert found is not None and found.run_id == "run_d"
        assert [r.run_id for r in a.list_runs()] == ["run_d", "run_c", "run_a"]
    finally:
        a.close()
        b.close()


def test_a_run_another_server_executes_cannot_be_resumed_here(postgres_url: str) -> None:
    a, b = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        a.create_run(record("run_1"))
        a.append(ev("run_1", 1, "run.started"))
        with pytest.raises(RunClaimedError) as caught:
            b.create_run(record("run_2", resumed_from="run_1"))
        assert caught.value.holder_run == "run_1" and caught.value.pid == os.getpid()
        assert b.recover(set(), interrupted) == []  # its owner is alive: nothing to recover
    finally:
        a.close()
        b.close()


def test_two_servers_never_interleave_a_runs_sequence(postgres_url: str) -> None:
    a, b = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        a.create_run(record("run_1"))
        a.append_many([ev("run_1", 1, "run.started"), ev("run_1", 2, "log")])
        with pytest.raises(SequenceConflictError):
            b.append_many([ev("run_1", 2, "log"), ev("run_1", 3, "log")])
        assert [e.sequence for e in a.events("run_1")] == [1, 2]
        b.append(ev("run_1", 3, "log"))
        assert b.last_sequence("run_1") == 3
    finally:
        a.close()
        b.close()


OWNER = """
import sys
from workflow_mcp.events import Event
from workflow_mcp.store import RunRecord
from workflow_mcp.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1])
store.create_run(RunRecord(run_id="run_k", workflow_name="wf", source_hash="h", source="s",
                           created_at="2026-11-30T10:00:00.000Z"))
store.append(Event(run_id="run_k", sequence=1, type="run.started", timestamp="2026-11-30T10:00:00.000Z"))
print("owning", flush=True)
sys.stdin.readline()
"""


def test_runs_of_a_sigkilled_server_are_interrupted_by_another_and_resumable(postgres_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER), postgres_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "owning"
        other = PostgresStore(postgres_url)
        try:
            with pytest.raises(RunClaimedError):
                other.create_run(record("run_r", resumed_from="run_k"))
            proc.send_signal(signal.SIGKILL)
            proc.wait(BOUND_S)
            assert other.recover(set(), interrupted) == ["run_k"]
            assert other.last_run_event("run_k") == "run.interrupted"
            assert other.recover(set(), interrupted) == []  # once
            other.create_run(record("run_r", resumed_from="run_k"))  # its claim is free now
        finally:
            other.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(BOUND_S)


def test_an_owner_on_another_host_keeps_its_claim_until_its_lease_expires(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.create_run(record("run_1"))
        store.append(ev("run_1", 1, "run.started"))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            # Hand the run to an owner on another host whose lease was renewed a moment ago.
            conn.execute(
                "INSERT INTO owners VALUES ('elsewhere', 4242, 'another-host', '', '2026-11-30', "
                "EXTRACT(EPOCH FROM clock_timestamp()))"
            )
            conn.execute("UPDATE run_claims SET owner_id = 'elsewhere'")
            other = PostgresStore(postgres_url)
            try:
                assert other.recover(set(), interrupted) == []
                with pytest.raises(RunClaimedError, match="another-host"):
                    other.create_run(record("run_2", resumed_from="run_1"))
                conn.execute("UPDATE owners SET heartbeat_at = heartbeat_at - %s", (LEASE_TTL_S + 1,))
                assert other.recover(set(), interrupted) == ["run_1"]
                events = other.events("run_1")
                said = events[-1].payload["reason"]
                head = "the process that owned the run (pid 4242 on another-host) is gone: its lease was last renewed "
                tail = f" s ago (lease {LEASE_TTL_S:g} s)"
                assert said.startswith(head) and said.endswith(tail), said
                assert float(said[len(head) : -len(tail)]) >= LEASE_TTL_S + 1
                other.create_run(record("run_2", resumed_from="run_1"))
            finally:
                other.close()
    finally:
        store.close()


def test_a_clean_close_removes_the_owner_row(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    store.create_run(record("run_1"))
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM owners").fetchone() == (1,)
    store.close()
    store.close()  # twice is fine
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM owners").fetchone() == (0,)
    with pytest.raises(StoreError, match="is closed"):
        store.get_run("run_1")


def test_a_lone_surrogate_is_refused_and_nothing_of_the_batch_is_stored(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.create_run(record("run_1"))
        with pytest.raises(StoreError, match="refused by the store"):
            store.append_many([ev("run_1", 1, "run.started"), ev("run_1", 2, "log", message="\ud800")])
        assert store.events("run_1") == []
        store.append(ev("run_1", 1, "run.started"))
        assert store.last_sequence("run_1") == 1
    finally:
        store.close()


def test_a_body_another_program_wrote_reads_as_a_stand_in_in_its_place(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.create_run(record("run_1"))
        store.append_many([ev("run_1", 1, "run.started"), ev("run_1", 2, "log"), ev("run_1", 3, "log")])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("UPDATE events SET body = 'not json' WHERE sequence = 2")
        events = store.events("run_1")
        assert [e.sequence for e in events] == [1, 2, 3]
        assert events[1].payload["damaged"]["columns"] == ["body"]
        assert events[1].payload["original"] == "not json"
        assert [e.sequence for e in store.damaged_events("run_1")] == [2]
    finally:
        store.close()


def test_the_postgres_test_server_runs_in_a_directory_the_server_user_owns(postgres_cluster: object) -> None:
    root: Path = postgres_cluster.root  # type: ignore[attr-defined]
    assert (root / "data" / "PG_VERSION").is_file()
    if os.geteuid() == 0:
        import pwd

        assert pwd.getpwuid(root.stat().st_uid).pw_name == "postgres"


def test_every_table_has_the_columns_of_its_sqlite_twin_in_order(postgres_url: str, tmp_path: Path) -> None:
    from workflow_mcp.store import SqliteStore

    lite = SqliteStore(tmp_path / "state.db")
    pg = PostgresStore(postgres_url)
    try:
        for table in TABLES:
            if table == "workflow_mcp_schema":  # PostgreSQL's stand-in for PRAGMA user_version
                continue
            ours = [str(r[1]) for r in lite._read("schema", f"PRAGMA table_info({table})")]
            theirs = [
                str(r[0])
                for r in pg._read(
                    "schema",
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                    "AND table_name = %s ORDER BY ordinal_position",
                    (table,),
                )
            ]
            assert theirs == ours, table
    finally:
        lite.close()
        pg.close()


def test_an_owner_renews_its_lease_on_the_database_clock_and_a_reader_writes_nothing(
    postgres_url: str,
) -> None:
    reader, owner = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        reader.heartbeat()
        assert reader.list_runs() == []
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM owners").fetchone() == (0,)
            owner.create_run(record("run_1"))
            conn.execute("UPDATE owners SET heartbeat_at = heartbeat_at - 100")
            (stale,) = conn.execute("SELECT heartbeat_at FROM owners").fetchone()
            owner.heartbeat()
            (fresh, now) = conn.execute(
                "SELECT heartbeat_at, EXTRACT(EPOCH FROM clock_timestamp())::float8 FROM owners"
            ).fetchone()
        assert fresh > stale + 99 and abs(now - fresh) < 5
    finally:
        reader.close()
        owner.close()


def test_a_read_only_server_answers_queries_and_refuses_writes_naming_it(postgres_url: str) -> None:
    from workflow_mcp.errors import StoreReadOnlyError

    writer = PostgresStore(postgres_url)
    writer.create_run(record("run_1"))
    writer.close()
    read_only = postgres_url + "%20-cdefault_transaction_read_only%3Don"  # as a hot standby answers
    store = PostgresStore(read_only)
    try:
        assert [r.run_id for r in store.list_runs()] == ["run_1"]
        assert isinstance(store.write_problem(), StoreReadOnlyError)
        with pytest.raises(StoreReadOnlyError, match="the server only reads"):
            store.create_run(record("run_2"))
        with pytest.raises(StoreReadOnlyError):
            store.request_cancel("run_1", "no")
        # run_1's owner closed without its terminal event: there is something to record, and no way to.
        with pytest.raises(StoreReadOnlyError):
            store.recover(set(), interrupted)
    finally:
        store.close()


def test_a_read_only_server_with_an_older_schema_is_refused(postgres_url: str) -> None:
    from workflow_mcp.errors import StoreReadOnlyError

    with pytest.raises(StoreReadOnlyError, match="its schema cannot be upgraded"):
        PostgresStore(postgres_url + "%20-cdefault_transaction_read_only%3Don")


def test_the_service_opens_the_database_the_url_or_the_environment_names(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workflow_mcp.service import WorkflowService
    from workflow_mcp.store import SqliteStore

    by_argument = WorkflowService.open(database_url=postgres_url)
    monkeypatch.setenv("WORKFLOW_MCP_DATABASE_URL", postgres_url)
    by_environment = WorkflowService.open()
    monkeypatch.delenv("WORKFLOW_MCP_DATABASE_URL")
    default = WorkflowService.open()
    try:
        assert isinstance(by_argument.store, PostgresStore) and isinstance(
            by_environment.store, PostgresStore
        )
        assert by_argument.database == redact(postgres_url)
        assert isinstance(default.store, SqliteStore)
    finally:
        for service in (by_argument, by_environment, default):
            service.store.close()


def test_a_server_older_than_postgresql_15_is_refused_naming_both_versions() -> None:
    from workflow_mcp.store.postgres import version_problem

    problem = version_problem(140011, "postgresql://db:5432/runs")
    assert problem is not None
    assert str(problem) == (
        "the PostgreSQL server postgresql://db:5432/runs runs version 14; workflow-mcp needs PostgreSQL 15 or later"
    )
    assert version_problem(150004, "x") is None and version_problem(170000, "x") is None


def test_an_owner_is_judged_by_the_lease_it_recorded_not_by_the_judge_s(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW_MCP_LEASE_S", "100")
    owner = PostgresStore(postgres_url)
    monkeypatch.delenv("WORKFLOW_MCP_LEASE_S")
    judge = PostgresStore(postgres_url)  # the default lease, 30 s
    try:
        owner.create_run(record("run_1"))
        owner.append(ev("run_1", 1, "run.started"))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            assert conn.execute("SELECT lease_s FROM owners").fetchone() == (100.0,)
            conn.execute(
                "UPDATE owners SET host = 'another-host', heartbeat_at = EXTRACT(EPOCH FROM clock_timestamp()) - 40"
            )
            assert judge.recover(set(), interrupted) == []  # 40 s unrenewed, within its 100 s lease
            with pytest.raises(RunClaimedError, match="another-host"):
                judge.create_run(record("run_2", resumed_from="run_1"))
            conn.execute("UPDATE owners SET heartbeat_at = heartbeat_at - 61")
        assert judge.recover(set(), interrupted) == ["run_1"]
        assert judge.events("run_1")[-1].payload["reason"].endswith("(lease 100 s)")
    finally:
        owner.close()
        judge.close()


def test_an_owner_whose_lease_expired_and_whose_run_was_taken_over_writes_nothing_more(
    postgres_url: str,
) -> None:
    # A server paused past its lease (SIGSTOP, a VM freeze) wakes up still holding its run in memory;
    # meanwhile another server judged it gone and resumed the run. Nothing it writes may land.
    paused = PostgresStore(postgres_url)
    other = PostgresStore(postgres_url)
    try:
        paused.create_run(record("run_1"))
        paused.append(ev("run_1", 1, "run.started"))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE owners SET host = 'another-host', "
                "heartbeat_at = EXTRACT(EPOCH FROM clock_timestamp()) - lease_s - 1"
            )
        other.create_run(record("run_2", resumed_from="run_1"))  # no recovery ran: the claim is taken
        paused.heartbeat()  # waking up renews the lease; the claim stays the other server's
        with pytest.raises(ClaimLostError, match=r"run_1 was taken over .*run run_2 holds its claim"):
            paused.append(ev("run_1", 2, "agent.queued"))
        other.append_many([ev("run_2", 1, "run.started"), ev("run_2", 2, "run.completed")])
        with pytest.raises(ClaimLostError, match="its claim was dropped"):  # gone with run_2's end
            paused.append(ev("run_1", 2, "run.failed"))
        assert [e.sequence for e in other.events("run_1")] == [1]
        # A run this store still holds is written as before, and its end releases it.
        paused.create_run(record("run_3"))
        paused.append_many([ev("run_3", 1, "run.started"), ev("run_3", 2, "run.completed")])
        assert [e.type for e in other.events("run_3")] == ["run.started", "run.completed"]
    finally:
        paused.close()
        other.close()


def test_text_with_a_nul_character_matches_no_row_and_is_refused_naming_the_rule(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        assert store.get_run("run_\x00") is None and store.events("run_\x00") == []
        assert store.last_sequence("run_\x00") == 0 and store.find_idempotent("o\x00", "k") is None
        with pytest.raises(StoreError, match=r"cannot hold the NUL character \(U\+0000\)"):
            store.create_run(record("run_1", cwd="/srv/\x00"))
        assert store.get_run("run_1") is None  # nothing of it stored
    finally:
        store.close()


def test_hostile_text_in_every_kind_of_key_is_data_never_sql(postgres_url: str) -> None:
    hostile = "x'); DROP TABLE runs; --"
    store = PostgresStore(postgres_url)
    try:
        store.create_run(record(hostile, owner=hostile, idempotency_key=hostile, cwd=hostile))
        store.append(ev(hostile, 1, "run.started"))
        store.request_cancel(hostile, hostile)
        assert store.get_run(hostile) is not None and store.get_run(hostile + "'") is None
        assert store.find_idempotent(hostile, hostile) is not None
        assert [e.sequence for e in store.events(hostile)] == [1]
        assert store.cancel_requests([hostile, "' OR '1'='1"]) == {hostile: hostile}
        assert set(TABLES) <= set(store.tables())
    finally:
        store.close()
