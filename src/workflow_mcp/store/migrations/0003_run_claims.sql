-- workflow-mcp state database, migration 3.
-- One executor per run. `owners` holds one row per open store that has started or resumed a run: its
-- process (pid, host, and an identity that survives pid reuse) and a lease renewed while it runs
-- something. A clean close deletes the row, so a row whose process is gone also says the database was
-- not closed cleanly (the next open runs PRAGMA quick_check).
CREATE TABLE owners (
    owner_id     TEXT PRIMARY KEY,
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    process      TEXT NOT NULL,
    opened_at    TEXT NOT NULL,
    heartbeat_at REAL NOT NULL
) WITHOUT ROWID;

-- `run_claims`: the run an owner executes (holder_run = run_id) and the run a resume continues
-- (holder_run = the new run). Deleted in the transaction that stores the holder's terminal event.
CREATE TABLE run_claims (
    run_id     TEXT PRIMARY KEY REFERENCES runs(run_id),
    holder_run TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    claimed_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX run_claims_holder ON run_claims(holder_run);

