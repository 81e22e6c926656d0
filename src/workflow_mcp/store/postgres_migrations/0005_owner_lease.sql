-- workflow-mcp PostgreSQL store, migration 5 (SQLite migration 5).
-- Each owner records the lease it renews (seconds; WORKFLOW_MCP_LEASE_S when it opened the store), so
-- every server judges it by its own lease, never by the judge's: servers configured differently cannot
-- take a live server's runs. Rows of an older release read as the default lease.
ALTER TABLE owners ADD COLUMN lease_s DOUBLE PRECISION NOT NULL DEFAULT 30
