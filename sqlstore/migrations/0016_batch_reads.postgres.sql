-- What a batch of sends reads before its callers run (sqlstore Tx.prefetch):
-- the recipients of its sends and its tenants' phones_version, in one
-- statement. As a plain statement it had to be planned at every execution
-- (about 0.1 ms of the backend's CPU a batch, twice its execution): a
-- generic plan made while recipients held a few rows (a new database) is a
-- hash join over a sequential scan of the table, and it stays one as the
-- table grows, with no autovacuum's ANALYZE to make PostgreSQL plan again.
-- In this function the plan is made once per connection, generic, with the
-- sequential scans and hash and merge joins priced out, so that it is
-- always a nested loop over the primary keys, whatever the tables held when
-- it was made (sqlstore/TestBatchReadsPlan).
CREATE FUNCTION batch_reads(rcp_tenants TEXT[], rcp_envs TEXT[], rcp_numbers TEXT[], tenant_ids TEXT[])
RETURNS TABLE (kind INTEGER, tenant_id TEXT, environment TEXT, number TEXT,
               opted_out INTEGER, phone_id TEXT, reserved_by TEXT, phones_version BIGINT)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    RETURN QUERY
    SELECT 0, k.t, k.e, k.n, r.opted_out, r.phone_id, r.reserved_by, 0::BIGINT
    FROM unnest(rcp_tenants, rcp_envs, rcp_numbers) AS k(t, e, n)
    LEFT JOIN recipients r ON r.tenant_id = k.t AND r.environment = k.e AND r.number = k.n
    UNION ALL
    SELECT 1, tn.id, '', '', NULL::INTEGER, NULL::TEXT, NULL::TEXT, tn.phones_version
    FROM tenants tn WHERE tn.id = ANY(tenant_ids);
END
$$;
