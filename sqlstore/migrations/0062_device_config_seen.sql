-- What a paired device last fetched of its settings (GET /settings) and its
-- webhook subscriptions (GET /webhooks), as hashes of the answers: when
-- what Switchboard would answer now differs, the device is told
-- SettingsUpdated or WebhooksUpdated on its event stream.
ALTER TABLE phones ADD COLUMN settings_hash TEXT;
ALTER TABLE phones ADD COLUMN webhooks_hash TEXT;
