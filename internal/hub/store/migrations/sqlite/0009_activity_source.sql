-- Who made each activity record: 'hub' (its own record of a call it routed,
-- or of its own action: fact) or 'daemon' (a machine's account of its own
-- work, unverified); the machine the record is about (the call's target for
-- the hub's records, the reporting machine for a daemon's); and its size in
-- bytes, which retention counts.
ALTER TABLE activity ADD COLUMN source TEXT NOT NULL DEFAULT 'daemon';
ALTER TABLE activity ADD COLUMN subject TEXT NOT NULL DEFAULT '';
ALTER TABLE activity ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
UPDATE activity SET subject = machine_id, size = length(CAST(record AS BLOB));
UPDATE activity SET source = 'hub' WHERE machine_id LIKE 'sb-hub-%';
CREATE INDEX activity_subject ON activity (subject, id);
