-- Several SIMs on one device: a phone added with device_phone_id shares the
-- device of that phone (device_of), one phone per SIM (sim_number). It has
-- no token or inbound secret of its own: the device speaks for all its
-- phones with its one token.
ALTER TABLE phones ADD COLUMN device_of TEXT;
CREATE INDEX phones_device_of ON phones (device_of) WHERE device_of IS NOT NULL;
