-- The outcome of a batch of delivered messages (sqlstore Tx.finish): their
-- claims deleted and their rows made final, in one call. As a plain
-- statement it had to be planned at every execution (about 0.2 ms of the
-- backend's CPU a batch; with several nodes, smaller batches and more of
-- them): a generic plan made while messages held a few rows is a
-- sequential scan, and it stays one as the table grows (see 0016). In this
-- function the plans are made once per connection, generic, with the
-- sequential and bitmap scans priced out, so that both statements reach
-- their rows by primary key whatever the tables held when the plans were
-- made (sqlstore/TestFinishDeliveredPlan).
CREATE FUNCTION finish_delivered(p_ids TEXT[], p_delivered_at BIGINT, p_sent_at BIGINT)
RETURNS TABLE (id TEXT, tenant_id TEXT, environment TEXT, from_number TEXT, to_number TEXT,
               channel TEXT, created_at BIGINT, scheduled_at BIGINT)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
BEGIN
    DELETE FROM message_claims c WHERE c.message_id = ANY(p_ids);
    RETURN QUERY
    UPDATE messages m SET status = 'delivered', delivered_at = p_delivered_at,
        sent_at = COALESCE(m.sent_at, p_sent_at), run_at = NULL, device_due = NULL
    WHERE m.id = ANY(p_ids) AND m.status IN ('queued', 'sent')
    RETURNING m.id, m.tenant_id, m.environment, m.from_number, m.to_number, m.channel, m.created_at, m.scheduled_at;
END
$$;
