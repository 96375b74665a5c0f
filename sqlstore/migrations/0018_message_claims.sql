-- The claims of the delivery queue, in a table of their own (see
-- sqlstore/queue.go). A message a node's delivery worker holds, under a
-- lease and then, once handed to the provider, until the deadline for its
-- outcome, has a row here and no run_at; finishing it deletes the row. So
-- the update that finishes a message changes no indexed column of
-- messages, and on PostgreSQL it is a heap-only (HOT) update that writes
-- no index entry (see 0019 and docs/scale-out.md). A claim whose until has
-- passed is moved back into the queue (run_at) by the next poll; a dead
-- node's claims by the node that notices its death.
CREATE TABLE message_claims (
    message_id TEXT PRIMARY KEY,
    node       TEXT NOT NULL,
    until      BIGINT NOT NULL
);
CREATE INDEX message_claims_until ON message_claims (until);
