-- workflow-mcp state database, migration 1.
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
CREATE UNIQUE INDEX runs_idempotency ON runs(owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_created ON runs(created_at);

CREATE TABLE events (
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    sequence   INTEGER NOT NULL,
    type       TEXT NOT NULL,
    timestamp  TEXT NOT NULL,
    agent_id   TEXT,
    body       TEXT NOT NULL,
    PRIMARY KEY (run_id, sequence)
) WITHOUT ROWID;
CREATE INDEX events_type ON events(run_id, type);

CREATE TABLE journal (
    run_id       TEXT NOT NULL REFERENCES runs(run_id),
    agent_id     TEXT NOT NULL,
    ordinal      INTEGER NOT NULL,
    key          TEXT NOT NULL,
    content_key  TEXT NOT NULL,
    status       TEXT NOT NULL,
    label        TEXT NOT NULL DEFAULT '',
    result_json  TEXT,
    tokens_json  TEXT NOT NULL DEFAULT '{}',
    side_effects INTEGER NOT NULL DEFAULT 0,
    source_run   TEXT,
    PRIMARY KEY (run_id, agent_id)
) WITHOUT ROWID;

CREATE TABLE artifacts (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    artifact_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    mime_type   TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    data        BLOB NOT NULL,
    PRIMARY KEY (run_id, artifact_id)
) WITHOUT ROWID;

