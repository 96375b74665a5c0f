-- The check of the reads a batch of sends took from what its node kept
-- (sqlstore/keptreads.go) instead of reading them: it fails, with SQLSTATE
-- SBR01, unless every recipient given exists as given (opted_out, phone_id
-- and reserved_by; '' for NULL) and every tenant's phones_version is the
-- one given. It runs in the transaction right after BEGIN, before any of
-- its writes. Its plans are made as batch_reads' (migration 0016): once
-- per connection, always a nested loop over the primary keys
-- (sqlstore/TestCheckReadsPlan).
CREATE FUNCTION check_reads(rcp_tenants TEXT[], rcp_envs TEXT[], rcp_numbers TEXT[], rcp_opted INTEGER[],
                            rcp_phones TEXT[], rcp_reserved TEXT[], tenant_ids TEXT[], versions BIGINT[])
RETURNS void
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM unnest(rcp_tenants, rcp_envs, rcp_numbers, rcp_opted, rcp_phones, rcp_reserved) AS k(t, e, n, o, p, r)
        LEFT JOIN recipients x ON x.tenant_id = k.t AND x.environment = k.e AND x.number = k.n
        WHERE x.tenant_id IS NULL OR x.opted_out <> k.o OR COALESCE(x.phone_id, '') <> k.p OR COALESCE(x.reserved_by, '') <> k.r
    ) OR EXISTS (
        SELECT 1 FROM unnest(tenant_ids, versions) AS k(t, v)
        LEFT JOIN tenants x ON x.id = k.t
        WHERE x.id IS NULL OR x.phones_version <> k.v
    ) THEN
        RAISE EXCEPTION 'the reads this node kept have changed' USING ERRCODE = 'SBR01';
    END IF;
END
$$;
