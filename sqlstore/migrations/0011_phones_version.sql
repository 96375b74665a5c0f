-- A version of each tenant's phones, raised by every change to them (added,
-- deleted, limits, the operator's switch, a device paired), so that a node
-- that keeps a tenant's phones in memory sees, with one cheap read, whether
-- they are still the same, whichever process changed them.
ALTER TABLE tenants ADD COLUMN phones_version BIGINT NOT NULL DEFAULT 0;
