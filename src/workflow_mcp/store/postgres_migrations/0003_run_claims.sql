-- workflow-mcp PostgreSQL store, migration 3 (SQLite migration 3).
-- One executor per run across every server on the database. `owners`: one row per open store that has
-- started or resumed a run, with its process identity and a lease (`heartbeat_at`, epoch seconds of
-- the database's clock, so servers on several hosts share one clock) renewed while it runs something.
CREATE TABLE owners (
    owner_id     TEXT PRIMARY KEY,
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    process      TEXT NOT NULL,
    opened_at    TEXT NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);

-- The run an owner executes (holder_run = run_id) and the run a resume continues (holder_run = the new
-- run); deleted in the transaction that stores the holder's terminal event.
CREATE TABLE run_claims (
    run_id     TEXT PRIMARY KEY REFERENCES runs (run_id),
    holder_run TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    claimed_at TEXT NOT NULL
);
CREATE INDEX run_claims_holder ON run_claims (holder_run);
