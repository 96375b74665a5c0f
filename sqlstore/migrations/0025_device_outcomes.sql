-- A message handed to a device stays with it until the device reports on it
-- (docs/phones.md): its device_due becomes the time it fails with its
-- outcome unknown, and its device finds it again through messages_device_held.
-- Processed makes a message sent: those a device reported Processed before
-- this version kept queued are sent now (sent_at, not recorded then, is
-- their creation, the earliest it can be).
CREATE INDEX messages_device_held ON messages (device_id) WHERE device_due IS NOT NULL AND device_id IS NOT NULL;
UPDATE messages SET status = 'sent', sent_at = COALESCE(sent_at, created_at), device_due = NULL
	WHERE status = 'queued' AND device_state = 'Processed';
-- Whether the paired device's app registered a Google push token: such an
-- app (its notification channel on Auto) does not hold the event stream.
ALTER TABLE phones ADD COLUMN device_push_token INTEGER NOT NULL DEFAULT 0;
