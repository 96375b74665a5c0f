-- Webhook secret rotation: after PATCH /v1/webhooks/{id} changes the
-- secret, the secret it replaced goes on signing deliveries (beside the new
-- one) until previous_secret_expires_at.
ALTER TABLE webhooks ADD COLUMN previous_secret TEXT;
ALTER TABLE webhooks ADD COLUMN previous_secret_expires_at BIGINT;

-- What a campaign message reserved of the daily limits, so that a cancel
-- gives it back when the message is withdrawn: counted_day is the UTC day
-- (YYYY-MM-DD) on whose counters the message was counted (the tenant's new
-- contacts, when it made its recipient known, and its phone's), and
-- counted_phone the phone whose counter of that day holds it (NULL once
-- the message moved to another phone). NULL for messages that reserved
-- nothing to give back (direct sends, inbound ones, and campaign messages
-- stored before this migration).
ALTER TABLE messages ADD COLUMN counted_day TEXT;
ALTER TABLE messages ADD COLUMN counted_phone TEXT;

-- The campaign message whose creation made the recipient known (and counted
-- it as a new contact on that message's counted_day), until anything else
-- uses the recipient: another message to it, or one from it. While it is
-- set, withdrawing that message forgets the recipient and gives the
-- new-contact count back.
ALTER TABLE recipients ADD COLUMN reserved_by TEXT;
