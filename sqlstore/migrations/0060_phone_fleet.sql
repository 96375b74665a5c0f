-- The fleet of phones (docs/phones.md). Health: what a phone's app last
-- said in its system:ping (battery in percent, charging, network kind,
-- failed messages in its last hour, when). Quarantine: when and why a phone
-- was quarantined (its status is then 'quarantined'), its own policy
-- (failures of the last N reports; NULL for the default), and its recent
-- outcomes (a JSON array, oldest first) that the policy reads. Warm-up: the
-- first day's limit, the days to the daily limit, and the day it started.
ALTER TABLE phones ADD COLUMN health_battery INTEGER;
ALTER TABLE phones ADD COLUMN health_charging INTEGER;
ALTER TABLE phones ADD COLUMN health_network TEXT;
ALTER TABLE phones ADD COLUMN health_failed INTEGER;
ALTER TABLE phones ADD COLUMN health_at BIGINT;
ALTER TABLE phones ADD COLUMN quarantined_at BIGINT;
ALTER TABLE phones ADD COLUMN quarantine_reasons TEXT;
ALTER TABLE phones ADD COLUMN quarantine_failed INTEGER;
ALTER TABLE phones ADD COLUMN quarantine_of INTEGER;
ALTER TABLE phones ADD COLUMN send_outcomes TEXT;
ALTER TABLE phones ADD COLUMN warmup_start INTEGER;
ALTER TABLE phones ADD COLUMN warmup_days INTEGER;
ALTER TABLE phones ADD COLUMN warmup_from BIGINT;
-- Phone events (phone.offline, phone.online, phone.quarantined) name a
-- phone, not a message: their deliveries keep message_id empty.
ALTER TABLE webhook_deliveries ADD COLUMN phone_id TEXT;
