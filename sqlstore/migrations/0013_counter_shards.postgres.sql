-- Daily counters without a hot row. Every send counted on its phone's
-- counter (and a new recipient on the tenant's new_contacts), and every
-- writer of every node updated the same row, holding its lock until its
-- batch committed: the nodes took turns. A counter is now the sum of its
-- shards: each group-commit writer adds to a shard of its own (see
-- sqlstore/counters.go), and the rows of a counter are read with SUM.
ALTER TABLE daily_counters ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
ALTER TABLE daily_counters DROP CONSTRAINT daily_counters_pkey;
ALTER TABLE daily_counters ADD PRIMARY KEY (tenant_id, environment, counter, day, shard);

-- What nodes have reserved of a counter that has a daily limit (a phone's
-- daily_limit, a plan's new contacts per day): a node takes a block of the
-- limit in one short transaction and spends it in memory, so the limit is
-- never exceeded without a row that every send locks. reserved >= the
-- counter's sum while every node spends only what it reserved; the
-- counters counted so far start reserved.
CREATE TABLE daily_reservations (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    counter     TEXT NOT NULL,
    day         TEXT NOT NULL,
    reserved    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, counter, day)
);
INSERT INTO daily_reservations (tenant_id, environment, counter, day, reserved)
    SELECT tenant_id, environment, counter, day, n FROM daily_counters;
