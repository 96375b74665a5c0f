-- A phone's number is unique within its tenant; an android phone's number
-- may also be another tenant's (a paired device proves a number, and its
-- inbound texts find it by the device's secret), so that no tenant can hold
-- a number against the others. Carrier and simulated phones' numbers stay
-- unique among them all: carriers route inbound texts by number. (SQLite
-- rebuilds the table in Go: see migrations.go.)
ALTER TABLE phones DROP CONSTRAINT IF EXISTS phones_number_key;
CREATE UNIQUE INDEX phones_tenant_number ON phones (tenant_id, number);
CREATE UNIQUE INDEX phones_number ON phones (number) WHERE kind <> 'android';
