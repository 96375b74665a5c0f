-- Contacts (a tenant's address book per environment; opt-out state stays in
-- recipients and is joined by number) and campaigns (one message to many
-- recipients, expanded into ordinary messages by the campaign runner).
CREATE TABLE contacts (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    environment TEXT NOT NULL,
    phone       TEXT NOT NULL,
    name        TEXT,
    fields      TEXT NOT NULL, -- JSON object of strings
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    UNIQUE (tenant_id, environment, phone)
);
CREATE INDEX contacts_tenant ON contacts (tenant_id, environment, id);

CREATE TABLE campaigns (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    environment       TEXT NOT NULL,
    name              TEXT NOT NULL,
    body              TEXT,
    template          TEXT,
    template_body     TEXT,          -- the template's text when the campaign was created
    data              TEXT,          -- JSON object of strings, with template
    channel           TEXT NOT NULL,
    audience          TEXT NOT NULL, -- contact_ids, to or all_contacts
    recipients        TEXT,          -- JSON array of numbers or contact ids
    status            TEXT NOT NULL,
    total             INTEGER NOT NULL,
    -- Expansion progress, written in the same transaction as the messages
    -- of each chunk: progress recipients done, after_contact the last
    -- contact id done (all_contacts), expanded once all are done.
    progress          INTEGER NOT NULL DEFAULT 0,
    after_contact     TEXT,
    expanded          INTEGER NOT NULL DEFAULT 0,
    withdrawn         INTEGER NOT NULL DEFAULT 0,
    skipped_opted_out INTEGER NOT NULL DEFAULT 0,
    skipped_invalid   INTEGER NOT NULL DEFAULT 0,
    deferred_quiet    INTEGER NOT NULL DEFAULT 0,
    deferred_limits   INTEGER NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    launched_at       BIGINT,
    completed_at      BIGINT,
    canceled_at       BIGINT
);
CREATE INDEX campaigns_tenant ON campaigns (tenant_id, environment, id);
-- The runner's work: running campaigns, and canceled ones whose unsent
-- messages are not withdrawn yet.
CREATE INDEX campaigns_active ON campaigns (id) WHERE status = 'running' OR (status = 'canceled' AND withdrawn = 0);

-- A campaign's messages by outcome (counts, completion, withdrawal).
CREATE INDEX messages_campaign ON messages (tenant_id, campaign_id, status, error_code) WHERE campaign_id IS NOT NULL;
