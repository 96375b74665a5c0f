-- Carrier links (contract section 9). A carrier phone names the link its
-- number lives at (its kind is the link's type: smpp or twilio).
ALTER TABLE phones ADD COLUMN link TEXT;
CREATE INDEX phones_link ON phones (link, number) WHERE link IS NOT NULL;

-- The parts of a message at its link: an SMPP message goes as one or more
-- segments, each a submit_sm of its own (a Twilio message is one part).
-- state: written (on the wire, its answer not come: in doubt), accepted (the
-- carrier gave it an id), delivered or failed (its receipt). written_at is
-- when a part in doubt was written.
CREATE TABLE carrier_parts (
    message_id  TEXT NOT NULL,
    part        INTEGER NOT NULL,
    parts       INTEGER NOT NULL,
    link        TEXT NOT NULL,
    state       TEXT NOT NULL,
    written_at  BIGINT,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (message_id, part)
);
CREATE INDEX carrier_parts_doubt ON carrier_parts (link, written_at) WHERE state = 'written';

-- The carrier's ids of the parts: the SMSC's message_id of a submit_sm, or
-- Twilio's message SID. A part written twice (its first answer lost) can
-- have two.
CREATE TABLE carrier_ids (
    link        TEXT NOT NULL,
    external_id TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    part        INTEGER NOT NULL,
    PRIMARY KEY (link, external_id)
);

-- Receipts that named an id no part had yet (the answer that gives the id
-- is recorded by another node, or was lost): applied when the id arrives,
-- or adopted by a part in doubt with the same addresses (from_number: the
-- number the message went out from; to_number: its recipient) and text.
CREATE TABLE carrier_orphans (
    link        TEXT NOT NULL,
    external_id TEXT NOT NULL,
    state       INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    at          BIGINT NOT NULL,
    from_number TEXT NOT NULL,
    to_number   TEXT NOT NULL,
    text        TEXT NOT NULL,
    PRIMARY KEY (link, external_id)
);
CREATE INDEX carrier_orphans_numbers ON carrier_orphans (link, from_number, to_number);
CREATE INDEX carrier_orphans_at ON carrier_orphans (at);
