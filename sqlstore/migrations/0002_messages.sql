-- Messages, the delivery queue (kept in the messages table itself), recipients
-- (opt-out, first contact, sticky phone), daily counters, templates and
-- idempotency records. Timestamps are BIGINT Unix microseconds.
CREATE TABLE messages (
    id             TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL REFERENCES tenants(id),
    environment    TEXT NOT NULL,
    direction      TEXT NOT NULL,
    from_number    TEXT NOT NULL,
    to_number      TEXT NOT NULL,
    body           TEXT NOT NULL,
    channel        TEXT NOT NULL,
    status         TEXT NOT NULL,
    failure_reason TEXT,
    error_code     TEXT,
    template       TEXT,
    campaign_id    TEXT,
    phone_id       TEXT,
    created_at     BIGINT NOT NULL,
    scheduled_at   BIGINT,
    sent_at        BIGINT,
    delivered_at   BIGINT,
    failed_at      BIGINT,
    -- The queue: a message is due when run_at <= now. Claiming moves run_at
    -- forward by the lease; finishing sets it to NULL. attempts counts
    -- hand-offs to the provider.
    run_at         BIGINT,
    attempts       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_tenant ON messages (tenant_id, environment, id);
CREATE INDEX messages_tenant_to ON messages (tenant_id, environment, to_number, id);
CREATE INDEX messages_due ON messages (run_at) WHERE run_at IS NOT NULL;

CREATE TABLE recipients (
    tenant_id      TEXT NOT NULL REFERENCES tenants(id),
    environment    TEXT NOT NULL,
    number         TEXT NOT NULL,
    opted_out      INTEGER NOT NULL DEFAULT 0,
    phone_id       TEXT,
    first_seen_at  BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, number)
);

-- Per-day counters: new contacts per tenant, messages per sending phone.
CREATE TABLE daily_counters (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    counter     TEXT NOT NULL,
    day         TEXT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, counter, day)
);

CREATE TABLE templates (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    environment TEXT NOT NULL,
    name        TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (tenant_id, environment, name)
);
CREATE INDEX templates_tenant ON templates (tenant_id, environment, id);

CREATE TABLE idempotency_keys (
    tenant_id    TEXT NOT NULL,
    environment  TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL,
    response     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, key)
);
