-- The dashboard (contract section 10): one-time sign-in links made by an
-- operator, and the sessions of signed-in browsers. Only SHA-256 hashes of
-- link tokens and session ids are stored, so a copy of the database opens
-- no session.
CREATE TABLE dashboard_links (
    token_hash TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX dashboard_links_expiry ON dashboard_links (expires_at);

CREATE TABLE dashboard_sessions (
    id_hash    TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    -- link or key; key_id is the key pasted to sign in, whose revocation or
    -- deactivation ends the session; test_only is set for a test key.
    method     TEXT NOT NULL,
    key_id     TEXT,
    test_only  INTEGER NOT NULL DEFAULT 0,
    -- set when a rule ended the session (suspended: the tenant was
    -- suspended); the browser is told why, once, and the row deleted
    ended      TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_tenant ON dashboard_sessions (tenant_id);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

-- A message's page lists its webhook deliveries.
CREATE INDEX webhook_deliveries_message ON webhook_deliveries (message_id);
