-- Two lanes in the delivery queue: direct sends are claimed before campaign
-- messages, so a large campaign never delays a direct send.
DROP INDEX messages_due;
CREATE INDEX messages_due_direct ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NULL;
CREATE INDEX messages_due_campaign ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NOT NULL;
