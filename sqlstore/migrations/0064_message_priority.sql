-- A send's priority: 1 for "high" (handed to its device first, and the app
-- skips its own limits and delays for it), 0 for "normal".
ALTER TABLE messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
