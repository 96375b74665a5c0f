-- The foreign keys from the send path's rows to their tenant go. Every
-- transaction that inserted a message or a recipient checked its tenant
-- with a trigger and locked the tenant's row FOR KEY SHARE until its
-- commit: the writers of all the nodes held that lock on the same row at
-- once, which made PostgreSQL write a multixact for it over and over. With
-- three nodes on one database, dropping them cut PostgreSQL's CPU per send
-- by about 9% and added about 10% to the sends a second
-- (docs/scale-out.md). They guarded nothing the code can do: a tenant is
-- never deleted and its id never changes, and every insert takes the
-- tenant's id from an authenticated key or a row of the tenant. The other
-- tables keep theirs; SQLite, with one writer, keeps them all.
ALTER TABLE messages DROP CONSTRAINT messages_tenant_id_fkey;
ALTER TABLE recipients DROP CONSTRAINT recipients_tenant_id_fkey;
