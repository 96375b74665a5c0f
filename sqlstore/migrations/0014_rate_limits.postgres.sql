-- PostgreSQL: the state of the shared rate limiter (ratelimit.Postgres)
-- when no Redis is configured, or while Redis is unreachable: one row per
-- bucket (a key's id, or "tenant:" and a tenant's id) holding its GCRA
-- theoretical arrival time, in microseconds since the Unix epoch by the
-- database server's clock. ok is whether the last request was allowed and
-- seen when it came (the server's clock then); one UPSERT per decision
-- writes them and returns them, so the limiter learns its decision in one
-- round trip. A row whose tat has passed means a full bucket, like no row,
-- and is swept now and then.
--
-- UNLOGGED: the table is not written to the WAL, so each decision costs no
-- fsync; after a crash of the database server it is empty, which gives
-- every bucket its whole burst again, as a restart of a node does today.
-- (SQLite serves one node, which keeps its limits in memory.)
CREATE UNLOGGED TABLE rate_limits (
    key  TEXT PRIMARY KEY,
    tat  BIGINT NOT NULL,
    ok   BOOLEAN NOT NULL,
    seen BIGINT NOT NULL
) WITH (fillfactor = 70);
