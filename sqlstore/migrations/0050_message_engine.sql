-- What carried a message (docs/api.md, the record's engine): simulator,
-- android, smpp, twilio, rbm or imessage. Messages stored before are given
-- the engine of their phone's kind (the simulator for the test
-- environment, simulated phones and deleted phones).
ALTER TABLE messages ADD COLUMN engine TEXT;
UPDATE messages SET engine = COALESCE(
    (SELECT CASE phones.kind WHEN 'simulated' THEN 'simulator' ELSE phones.kind END FROM phones WHERE phones.id = messages.phone_id),
    'simulator') WHERE environment = 'live';
UPDATE messages SET engine = 'simulator' WHERE environment <> 'live';
-- When a chat message was read (a chat engine's READ event).
ALTER TABLE messages ADD COLUMN read_at BIGINT;
-- A chat message of channel auto that was not delivered in time and was
-- sent again by SMS: the channel it left first, and why it fell back.
ALTER TABLE messages ADD COLUMN fallback_from TEXT;
ALTER TABLE messages ADD COLUMN fallback_reason TEXT;
