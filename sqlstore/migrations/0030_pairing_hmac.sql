-- Pairing codes are stored as their HMAC keyed with the server's pairing
-- key (see pairingkey.go), no longer as a bare SHA-256, which a copy of the
-- database would give up in a second (a code has 10^8 values). A code
-- stored the old way cannot be keyed without the code itself: it is voided.
-- Codes live 15 minutes; the phone's owner makes a new one with
-- POST /v1/phones/{id}/pairing.
UPDATE phones SET pairing_hash = NULL, pairing_expires_at = NULL WHERE pairing_hash IS NOT NULL;

-- Secrets the nodes of one database share: the pairing key, when no
-- --pairing-secret is given on PostgreSQL.
CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
