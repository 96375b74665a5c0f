-- The caps of the plan table on what a tenant's environment holds.
--
-- How many contacts each tenant's environment holds, kept by the store in the
-- transactions that create and delete contacts, so that checking max_contacts
-- costs no count over a table of millions of rows.
CREATE TABLE contact_counts (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment)
);
INSERT INTO contact_counts (tenant_id, environment, n)
    SELECT tenant_id, environment, COUNT(*) FROM contacts GROUP BY tenant_id, environment;

-- Open (draft or running) campaigns, counted against max_open_campaigns.
CREATE INDEX campaigns_open ON campaigns (tenant_id, environment) WHERE status IN ('draft', 'running');
