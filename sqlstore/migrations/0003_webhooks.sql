-- Webhook endpoints, their deliveries (one per event and endpoint, written
-- in the same transaction as the state change the event reports) and every
-- delivery attempt.
CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    environment TEXT NOT NULL,
    url         TEXT NOT NULL,
    events      TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    deleted_at  BIGINT
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, environment, id);

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL REFERENCES webhooks(id),
    tenant_id       TEXT NOT NULL,
    environment     TEXT NOT NULL,
    event           TEXT NOT NULL,
    message_id      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    -- attempts counts every attempt (the log); tries counts the attempts of
    -- the current cycle (a manual retry starts a new cycle of 1 + 3 retries).
    attempts        INTEGER NOT NULL DEFAULT 0,
    tries           INTEGER NOT NULL DEFAULT 0,
    -- Due when next_attempt_at <= now. A worker that claims a delivery sets
    -- leased and pushes next_attempt_at forward by its lease.
    next_attempt_at BIGINT,
    leased          INTEGER NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
    n           INTEGER NOT NULL,
    at          BIGINT NOT NULL,
    status_code INTEGER,
    error       TEXT,
    duration_ms INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, n)
);
