-- What phone.offline and phone.online last said of an android phone in
-- rotation ('online' or 'offline'; NULL before either), so that each change
-- is announced once, whichever node sees it first.
ALTER TABLE phones ADD COLUMN presence TEXT;
