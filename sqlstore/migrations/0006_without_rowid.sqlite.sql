-- SQLite: the hot tables become WITHOUT ROWID tables, stored in the b-tree of
-- their primary key. A rowid table with a TEXT primary key keeps a second
-- b-tree for the key: every lookup by key searched two trees and every insert
-- wrote both. (PostgreSQL has no rowid; its tables are unchanged.)
CREATE TABLE messages_new (
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
    run_at         BIGINT,
    attempts       INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO messages_new SELECT id, tenant_id, environment, direction, from_number, to_number, body, channel, status,
    failure_reason, error_code, template, campaign_id, phone_id, created_at, scheduled_at, sent_at, delivered_at, failed_at,
    run_at, attempts FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_tenant ON messages (tenant_id, environment, id);
CREATE INDEX messages_tenant_to ON messages (tenant_id, environment, to_number, id);
CREATE INDEX messages_due_direct ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NULL;
CREATE INDEX messages_due_campaign ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NOT NULL;
CREATE INDEX messages_campaign ON messages (tenant_id, campaign_id, status, error_code) WHERE campaign_id IS NOT NULL;

CREATE TABLE recipients_new (
    tenant_id      TEXT NOT NULL REFERENCES tenants(id),
    environment    TEXT NOT NULL,
    number         TEXT NOT NULL,
    opted_out      INTEGER NOT NULL DEFAULT 0,
    phone_id       TEXT,
    first_seen_at  BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, number)
) WITHOUT ROWID;
INSERT INTO recipients_new SELECT tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at FROM recipients;
DROP TABLE recipients;
ALTER TABLE recipients_new RENAME TO recipients;

CREATE TABLE daily_counters_new (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    counter     TEXT NOT NULL,
    day         TEXT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, counter, day)
) WITHOUT ROWID;
INSERT INTO daily_counters_new SELECT tenant_id, environment, counter, day, n FROM daily_counters;
DROP TABLE daily_counters;
ALTER TABLE daily_counters_new RENAME TO daily_counters;
