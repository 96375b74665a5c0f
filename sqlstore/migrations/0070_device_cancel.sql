-- Cancel on the phone: when a device holds a message that was canceled (a
-- canceled campaign's) and has not reported it Processed, cancel_at is when
-- the cancel was asked of the device. The device is told MessageCancelled on
-- its event stream, and the message is handed to it again with the app's
-- state "Cancelling", until the device reports it Cancelled (the message is
-- then failed with CAMPAIGN_CANCELED) or Processed (it went out: it stays
-- sent).
ALTER TABLE messages ADD COLUMN cancel_at BIGINT;
