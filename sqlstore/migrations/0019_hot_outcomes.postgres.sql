-- Heap-only (HOT) updates of messages on PostgreSQL. An update writes no
-- index entry when it changes no indexed column and the new row version
-- fits on the page of the old one. The outcome's update changes status and
-- (for claimed messages since 0018) nothing else that is indexed, so status
-- leaves the campaign index: a campaign's counts and its completion check
-- read the rows (the latter newest first, where the unfinished ones are).
-- fillfactor 50 leaves half of every new page for the versions written by
-- the hand-off and the outcome (pruned when the page is next visited).
DROP INDEX messages_campaign;
CREATE INDEX messages_campaign ON messages (tenant_id, campaign_id, id) WHERE campaign_id IS NOT NULL;
ALTER TABLE messages SET (fillfactor = 50);
