-- What a dashboard form shows once after it redirects (a new key's text, a
-- webhook's new secret, a pairing code, an import's report), sealed with a
-- key made from the session id, which only the browser holds: the database
-- cannot read it (see dashboard/flash.go). Taken once, kept 10 minutes.
CREATE TABLE dashboard_flashes (
    id           TEXT PRIMARY KEY,
    session_hash TEXT NOT NULL,
    sealed       TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX dashboard_flashes_created ON dashboard_flashes (created_at);
