-- workflow-mcp state database, migration 4.
-- The workflow library's sidecar: what a workflow file cannot hold without Claude Code rejecting it.
-- `root` is the real path of the workflows directory a file lives in (a project's .claude/workflows or
-- the personal one), so two projects may each hold a workflow of one name.

-- One row per stored version: its catalog metadata and its full source, so an earlier version stays
-- retrievable after a newer one replaced the file. `version` is canonical semver (no leading v, no
-- build metadata); `tags` and `fields` are JSON (a list of strings, an object).
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
) WITHOUT ROWID;
CREATE INDEX library_versions_hash ON library_versions(name, source_hash);

-- Drafts live here only (never in a workflows directory, so Claude's discovery never sees them): one
-- per name and directory; overwriting one keeps `created_at`. `expires_at` NULL: kept until deleted.
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
) WITHOUT ROWID;

-- Pending delete confirmations: the caller holds only the token; the row (keyed by the token's
-- SHA-256) holds what was shown. Taking one deletes it, so an answer works once.
CREATE TABLE library_confirmations (
    token_hash  TEXT PRIMARY KEY,
    root        TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     TEXT,
    draft_id    TEXT,
    file        TEXT,
    source_hash TEXT NOT NULL,
    expires_at  REAL NOT NULL
) WITHOUT ROWID;
