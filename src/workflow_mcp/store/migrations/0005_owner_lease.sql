-- workflow-mcp state database, migration 5.
-- Each owner records the lease it renews (seconds; WORKFLOW_MCP_LEASE_S when it opened the store), so
-- whoever judges it uses the owner's own lease, never the judge's: processes configured differently
-- cannot take a live owner's runs. Rows of an older release read as the default lease.
ALTER TABLE owners ADD COLUMN lease_s REAL NOT NULL DEFAULT 30
