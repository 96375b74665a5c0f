-- The two questions each node's delivery worker asks of the queue at every
-- poll (sqlstore/queue.go): whether anything is due now (queue_due, asked
-- before ClaimDue takes a group-commit transaction), and when the next
-- message or claim falls due within the poll's window (queue_next, for
-- NextDue). As plain statements they were three each, planned at every
-- execution (see 0016 for why a plan made once could not be kept): on
-- every node, four times a second, whatever the load. In these functions
-- each is one call whose plans are made once per connection, generic, with
-- sequential and bitmap scans priced out, so that they read the queue's
-- partial indexes and the claims' index on until whatever the tables held
-- when the plans were made (sqlstore/TestQueuePollsPlan).
CREATE FUNCTION queue_due(p_now BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM messages WHERE run_at <= p_now AND campaign_id IS NULL)
        OR EXISTS (SELECT 1 FROM messages WHERE run_at <= p_now AND campaign_id IS NOT NULL)
        OR EXISTS (SELECT 1 FROM message_claims WHERE until <= p_now);
END
$$;

CREATE FUNCTION queue_next(p_after BIGINT, p_before BIGINT) RETURNS BIGINT
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
BEGIN
    RETURN LEAST(
        (SELECT MIN(run_at) FROM messages WHERE run_at > p_after AND run_at <= p_before AND campaign_id IS NULL),
        (SELECT MIN(run_at) FROM messages WHERE run_at > p_after AND run_at <= p_before AND campaign_id IS NOT NULL),
        (SELECT MIN(until) FROM message_claims WHERE until > p_after AND until <= p_before));
END
$$;
