-- Node liveness (PostgreSQL clusters; see docs/scale-out.md, "When a node
-- dies"). Every serve process registers here under a random id and beats
-- (heartbeat_at, in microseconds of the database's clock) about once a
-- second. A node whose beat is older than the dead-after limit is marked
-- dead (dead_at) by whichever live node sees it first, and that same
-- transaction makes the dead node's claimed messages and leased webhook
-- deliveries due again at once, rather than when their leases run out. A
-- node that stops cleanly deletes its row and releases its claims; rows of
-- dead nodes are kept an hour, for the operator, then deleted.
CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    addr         TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    dead_at      BIGINT,
    dead_by      TEXT
);

-- The node that holds a message's claim (set with run_at when a node claims
-- it, and at insert for the sends a node hands to its own worker), and a
-- webhook delivery's lease. Left as is once the claim ends: a claim counts
-- only while the message is queued or sent with a run_at (the delivery
-- leased). Not indexed: the takeover looks for them through the queue's
-- partial indexes, whose rows are the outstanding work only.
ALTER TABLE messages ADD COLUMN claimed_by TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN claimed_by TEXT;
