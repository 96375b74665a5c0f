-- The ttl of a send of channel auto, in seconds: how long a chat engine has
-- to deliver it before it goes again by SMS (docs/api.md, the record's
-- ttl). NULL on every other message.
ALTER TABLE messages ADD COLUMN ttl INTEGER;
