-- When the chat engine revoked a chat message of channel auto that it had
-- not delivered within its ttl (RBM: phones.agentMessages.delete answered
-- 200), in microseconds; NULL until then. A revoked message is never
-- revoked again: only sent again by SMS (docs/chat.md, "Fallback to SMS").
ALTER TABLE messages ADD COLUMN chat_revoked_at BIGINT;
