-- workflow-mcp PostgreSQL store, migration 2 (SQLite migration 2).
-- Cancellation asked through another server or process; the run's owner polls it.
CREATE TABLE cancel_requests (
    run_id       TEXT PRIMARY KEY REFERENCES runs (run_id),
    reason       TEXT NOT NULL,
    requested_at TEXT NOT NULL
);
