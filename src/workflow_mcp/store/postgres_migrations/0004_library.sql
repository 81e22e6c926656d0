-- workflow-mcp PostgreSQL store, migration 4 (SQLite migration 4): the workflow library's sidecar,
-- shared by every server on the database. `root` is the real path of the workflows directory a file
-- lives in. `tags` and `fields` are JSON text (a list of strings, an object), as in SQLite.

-- One row per stored version; the primary key makes exactly one of concurrent creates of one
-- name@version win, whichever server they reach.
CREATE TABLE library_versions (
    root        TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT NOT NULL,
    file        TEXT NOT NULL,
    source      TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    tags        TEXT NOT NULL,
    category    TEXT,
    author      TEXT,
    fields      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (root, name, version)
);
CREATE INDEX library_versions_hash ON library_versions (name, source_hash);

-- Drafts: one per name and directory; overwriting one keeps `draft_id` and `created_at`.
CREATE TABLE library_drafts (
    draft_id    TEXT PRIMARY KEY,
    root        TEXT NOT NULL,
    name        TEXT NOT NULL,
    source      TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    tags        TEXT NOT NULL,
    category    TEXT,
    author      TEXT,
    fields      TEXT NOT NULL,
    owner       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    expires_at  TEXT,
    UNIQUE (root, name)
);

-- Pending delete confirmations, keyed by the SHA-256 of the token the caller holds. Taking one
-- deletes it (DELETE … RETURNING), so an answer works once across every server.
CREATE TABLE library_confirmations (
    token_hash  TEXT PRIMARY KEY,
    root        TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT,
    draft_id    TEXT,
    file        TEXT,
    source_hash TEXT NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);
