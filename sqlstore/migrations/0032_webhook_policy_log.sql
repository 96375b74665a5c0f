-- A webhook's retry policy: "standard" (2, 4, 8 s) or "extended" (1 m to
-- 24 h); see sb.RetrySchedule. Existing webhooks keep the standard one.
ALTER TABLE webhooks ADD COLUMN retry_policy TEXT NOT NULL DEFAULT 'standard';
-- Recovering a webhook's failed deliveries reads them by webhook and time.
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (webhook_id, created_at) WHERE status = 'failed';
-- What an endpoint answered to an attempt (its first 2 KiB), shown in the
-- dashboard's delivery log beside the request's body.
ALTER TABLE webhook_attempts ADD COLUMN response_body TEXT;
-- A delivery of a test event sent from the dashboard: its message_id names
-- no message.
ALTER TABLE webhook_deliveries ADD COLUMN test INTEGER NOT NULL DEFAULT 0;
