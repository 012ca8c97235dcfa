-- Isolation is a property of an environment: 'runc' (a container of the
-- host's kernel) or 'gvisor' (gVisor's runsc). Custom image environments
-- carry it in their row; the built-in environment, which has no row, per
-- org in org_builtin (no row: runc).
ALTER TABLE environments ADD COLUMN isolation TEXT NOT NULL DEFAULT 'runc' CHECK (isolation IN ('runc', 'gvisor'));
CREATE TABLE org_builtin (
    org_id    TEXT NOT NULL PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    isolation TEXT NOT NULL CHECK (isolation IN ('runc', 'gvisor'))
);
