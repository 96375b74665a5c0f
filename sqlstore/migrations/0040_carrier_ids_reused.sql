-- An SMSC reuses its message ids (across days, across its own restarts): one
-- id can name parts of several messages at one link. The key takes the part
-- too, and at (when the id was recorded) lets a receipt prefer the latest of
-- the parts to the same recipient. Ids recorded before have at 0.
CREATE TABLE carrier_ids_new (
    link        TEXT NOT NULL,
    external_id TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    part        INTEGER NOT NULL,
    at          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (link, external_id, message_id, part)
);
INSERT INTO carrier_ids_new (link, external_id, message_id, part, at) SELECT link, external_id, message_id, part, 0 FROM carrier_ids;
DROP TABLE carrier_ids;
ALTER TABLE carrier_ids_new RENAME TO carrier_ids;
