-- A chat engine's phone (rbm, imessage) has a number unique within its
-- tenant only, as an android phone's: chat engines route replies by the
-- phone that last wrote to the person, never by number, and tenants bind
-- these numbers themselves (POST /v1/phones with provider), so that none
-- may hold a number against the others or learn that another has it.
DROP INDEX phones_number;
CREATE UNIQUE INDEX phones_number ON phones (number) WHERE kind NOT IN ('android', 'rbm', 'imessage');

-- finish_delivered (0020) also returns the engine that carried each
-- message, which switchboard_messages_total counts by.
DROP FUNCTION finish_delivered(TEXT[], BIGINT, BIGINT);
CREATE FUNCTION finish_delivered(p_ids TEXT[], p_delivered_at BIGINT, p_sent_at BIGINT)
RETURNS TABLE (id TEXT, tenant_id TEXT, environment TEXT, from_number TEXT, to_number TEXT,
               channel TEXT, created_at BIGINT, scheduled_at BIGINT, engine TEXT)
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
    RETURNING m.id, m.tenant_id, m.environment, m.from_number, m.to_number, m.channel, m.created_at, m.scheduled_at, m.engine;
END
$$;
