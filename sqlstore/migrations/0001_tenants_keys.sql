-- Tenants, API keys, monthly usage and sending phones.
-- Every timestamp is BIGINT Unix microseconds (UTC) in both dialects, so that
-- comparisons and ordering are identical on SQLite and PostgreSQL.
CREATE TABLE tenants (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    plan          TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'active',
    trial_ends_at BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    name         TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    key_hint     TEXT NOT NULL,
    environment  TEXT NOT NULL,
    status       TEXT NOT NULL,
    rate_limit   INTEGER,
    last_used_at BIGINT,
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_id, id);

CREATE TABLE usage_monthly (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    month     TEXT NOT NULL,
    calls     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, month)
);

CREATE TABLE phones (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    number      TEXT NOT NULL UNIQUE,
    daily_limit INTEGER,
    channels    TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX phones_tenant ON phones (tenant_id, id);
