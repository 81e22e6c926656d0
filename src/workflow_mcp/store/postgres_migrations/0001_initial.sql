-- workflow-mcp PostgreSQL store, migration 1 (the tables of SQLite migration 1).
-- Text columns hold what the SQLite store's hold (event bodies and options as JSON text, kept byte for
-- byte, never re-encoded as jsonb); PostgreSQL checks UTF-8 and types itself.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    workflow_name   TEXT NOT NULL,
    workflow_path   TEXT,
    source_hash     TEXT NOT NULL,
    source          TEXT NOT NULL,
    args_json       TEXT,
    options_json    TEXT NOT NULL DEFAULT '{}',
    provider        TEXT NOT NULL DEFAULT '',
    profile         TEXT NOT NULL DEFAULT '',
    cwd             TEXT,
    created_at      TEXT NOT NULL,
    resumed_from    TEXT,
    resume_policy   TEXT,
    idempotency_key TEXT,
    owner           TEXT,
    owner_pid       INTEGER,
    owner_host      TEXT
);
-- One run per (owner, key) across every server on the database; a key without an owner is one key too.
CREATE UNIQUE INDEX runs_idempotency ON runs (owner, idempotency_key) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_created ON runs (created_at);

CREATE TABLE events (
    run_id     TEXT NOT NULL REFERENCES runs (run_id),
    sequence   BIGINT NOT NULL,
    type       TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    agent_id   TEXT,
    body       TEXT NOT NULL,
    PRIMARY KEY (run_id, sequence)
);
CREATE INDEX events_type ON events (run_id, type, sequence);

CREATE TABLE journal (
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    agent_id     TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    key          TEXT NOT NULL,
    content_key  TEXT NOT NULL,
    status       TEXT NOT NULL,
    label        TEXT NOT NULL DEFAULT '',
    result_json  TEXT,
    tokens_json  TEXT NOT NULL DEFAULT '{}',
    side_effects BOOLEAN NOT NULL DEFAULT FALSE,
    source_run   TEXT,
    PRIMARY KEY (run_id, agent_id)
);

CREATE TABLE artifacts (
    run_id      TEXT NOT NULL REFERENCES runs (run_id),
    artifact_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    mime_type   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    data        BYTEA NOT NULL,
    PRIMARY KEY (run_id, artifact_id)
);
