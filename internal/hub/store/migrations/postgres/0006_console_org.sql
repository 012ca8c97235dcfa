-- The org a console session of the hub's owner is looking at, when the
-- owner switched away from the session's own org (NULL: its own). An org
-- deleted under it sends the session back to its own.
ALTER TABLE console_sessions ADD COLUMN act_org_id TEXT REFERENCES orgs (id) ON DELETE SET NULL;
