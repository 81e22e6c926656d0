-- workflow-mcp state database, migration 2.
-- Cancellation asked by another process (e.g. `workflow-mcp runs cancel`); the owner polls it.
CREATE TABLE cancel_requests (
    run_id       TEXT PRIMARY KEY REFERENCES runs(run_id),
    reason       TEXT NOT NULL,
    requested_at TEXT NOT NULL
) WITHOUT ROWID;
