-- Daily counters without a hot row (see 0013_counter_shards.postgres.sql):
-- a counter is the sum of its shards, one per group-commit writer.
CREATE TABLE daily_counters_new (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    counter     TEXT NOT NULL,
    day         TEXT NOT NULL,
    shard       INTEGER NOT NULL DEFAULT 0,
    n           BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, counter, day, shard)
) WITHOUT ROWID;
INSERT INTO daily_counters_new (tenant_id, environment, counter, day, shard, n)
    SELECT tenant_id, environment, counter, day, 0, n FROM daily_counters;
DROP TABLE daily_counters;
ALTER TABLE daily_counters_new RENAME TO daily_counters;

CREATE TABLE daily_reservations (
    tenant_id   TEXT NOT NULL,
    environment TEXT NOT NULL,
    counter     TEXT NOT NULL,
    day         TEXT NOT NULL,
    reserved    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, environment, counter, day)
) WITHOUT ROWID;
INSERT INTO daily_reservations (tenant_id, environment, counter, day, reserved)
    SELECT tenant_id, environment, counter, day, n FROM daily_counters;
