-- A chat engine's phone (rbm, imessage) has a number unique within its
-- tenant only, as an android phone's (see the PostgreSQL file).
DROP INDEX phones_number;
CREATE UNIQUE INDEX phones_number ON phones (number) WHERE kind NOT IN ('android', 'rbm', 'imessage');
