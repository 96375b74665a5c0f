-- finish_delivered (migration 0020) and the read of the webhooks its
-- events go to, in one call: rows of kind 0 are the messages made final,
-- as finish_delivered returns them; rows of kind 1 are the webhooks (id,
-- tenant_id, environment, events) of every tenant and environment among
-- them, deleted ones left out. sqlstore Tx.finish sends it with the
-- transaction's BEGIN when it is the transaction's first statement, so an
-- outcome batch costs the round trip of this call and the one of its
-- COMMIT, where the webhooks' read was a round trip of its own, and BEGIN
-- another. finish_delivered stays, for nodes of the version before while a
-- cluster is upgraded. Plans as in 0020 (sqlstore/TestFinishDeliveredPlan).
CREATE FUNCTION finish_delivered_hooks(p_ids TEXT[], p_delivered_at BIGINT, p_sent_at BIGINT)
RETURNS TABLE (kind INTEGER, id TEXT, tenant_id TEXT, environment TEXT, from_number TEXT, to_number TEXT,
               channel TEXT, created_at BIGINT, scheduled_at BIGINT, events TEXT)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
BEGIN
    DELETE FROM message_claims c WHERE c.message_id = ANY(p_ids);
    RETURN QUERY
    WITH done AS (
        UPDATE messages m SET status = 'delivered', delivered_at = p_delivered_at,
            sent_at = COALESCE(m.sent_at, p_sent_at), run_at = NULL, device_due = NULL
        WHERE m.id = ANY(p_ids) AND m.status IN ('queued', 'sent')
        RETURNING m.id, m.tenant_id, m.environment, m.from_number, m.to_number, m.channel, m.created_at, m.scheduled_at
    )
    SELECT 0, d.id, d.tenant_id, d.environment, d.from_number, d.to_number, d.channel, d.created_at, d.scheduled_at, NULL::TEXT
    FROM done d
    UNION ALL
    SELECT 1, w.id, w.tenant_id, w.environment, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, NULL::BIGINT, w.events
    FROM webhooks w
    WHERE w.deleted_at IS NULL AND (w.tenant_id, w.environment) IN (SELECT DISTINCT d.tenant_id, d.environment FROM done d);
END
$$;
