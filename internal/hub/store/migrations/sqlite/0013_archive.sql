-- Archived sandboxes (issue 21): a sandbox whose workspace is packed into
-- the hub's archive store, its container and volume removed, keeps its row
-- (same id, same conversation key) with state 'archived' and the id of
-- the archive's manifest here; '' for every other state.
ALTER TABLE sandboxes ADD COLUMN archive_id TEXT NOT NULL DEFAULT '';

-- An environment's own archive step: how long a sandbox idles before it is
-- archived. In milliseconds; 0: the hub's default, -1: never.
ALTER TABLE sandbox_policies ADD COLUMN archive_after_ms INTEGER NOT NULL DEFAULT 0 CHECK (archive_after_ms >= -1);
