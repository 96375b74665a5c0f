-- A chat message of channel auto sent through a chat engine is sent again
-- by SMS, once, if it is not delivered by chat_fallback_at (its ttl).
ALTER TABLE messages ADD COLUMN chat_fallback_at BIGINT;
CREATE INDEX messages_chat_fallback ON messages (chat_fallback_at) WHERE chat_fallback_at IS NOT NULL;
