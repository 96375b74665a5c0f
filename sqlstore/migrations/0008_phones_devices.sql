-- Sending phones get a kind: simulated (the built-in simulator) or android (a
-- real phone running "SMS Gateway for Android", paired with a one-time code).
-- An android phone keeps its paired device (the hash of its token, the hash
-- of the secret of its inbound callback), its pairing code (hashed) and the
-- pacing of the messages handed to it. Only hashes of codes, tokens and
-- secrets are stored.
ALTER TABLE phones ADD COLUMN kind TEXT NOT NULL DEFAULT 'simulated';
ALTER TABLE phones ADD COLUMN rate_limit INTEGER;
ALTER TABLE phones ADD COLUMN sim_number INTEGER;
ALTER TABLE phones ADD COLUMN last_seen_at BIGINT;
ALTER TABLE phones ADD COLUMN pairing_hash TEXT;
ALTER TABLE phones ADD COLUMN pairing_expires_at BIGINT;
ALTER TABLE phones ADD COLUMN device_id TEXT;
ALTER TABLE phones ADD COLUMN device_name TEXT;
ALTER TABLE phones ADD COLUMN device_paired_at BIGINT;
ALTER TABLE phones ADD COLUMN token_hash TEXT;
ALTER TABLE phones ADD COLUMN inbound_hash TEXT;
-- Pacing: the earliest time the next message may be handed to the device.
ALTER TABLE phones ADD COLUMN next_handout_at BIGINT;
CREATE UNIQUE INDEX phones_pairing ON phones (pairing_hash) WHERE pairing_hash IS NOT NULL;
CREATE UNIQUE INDEX phones_token ON phones (token_hash) WHERE token_hash IS NOT NULL;
CREATE UNIQUE INDEX phones_inbound ON phones (inbound_hash) WHERE inbound_hash IS NOT NULL;

-- The device queue. A live message of an android phone is not in the
-- delivery queue (run_at stays NULL): it waits in device_due for its phone's
-- device to take it. device_id is the device it was handed to, valid_until
-- the validUntil handed with it, device_state the last state that device
-- reported. from_pinned marks a message whose sender was named (`from`), which
-- never moves to another number. external_id is the id a device gave an
-- inbound text (its callbacks are retried), unique per phone.
ALTER TABLE messages ADD COLUMN device_due BIGINT;
ALTER TABLE messages ADD COLUMN device_id TEXT;
ALTER TABLE messages ADD COLUMN valid_until BIGINT;
ALTER TABLE messages ADD COLUMN device_state TEXT;
ALTER TABLE messages ADD COLUMN from_pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN external_id TEXT;
CREATE INDEX messages_device ON messages (phone_id, device_due) WHERE device_due IS NOT NULL;
CREATE INDEX messages_device_due ON messages (device_due) WHERE device_due IS NOT NULL;
CREATE UNIQUE INDEX messages_external ON messages (phone_id, external_id) WHERE external_id IS NOT NULL;
