-- The machine a node runs on (Linux's boot id, else the host name), so that
-- each node can count the live nodes that share its machine and split its
-- cores with them (see docs/scale-out.md, "Nodes sharing a machine").
-- Numbered 0023: 0022 was a migration written and then reverted (see
-- docs/scale-out.md, "outcome batches in two round trips").
ALTER TABLE nodes ADD COLUMN host TEXT NOT NULL DEFAULT '';
