-- Sandbox states (issue 21): a conversation's sandbox is 'running',
-- 'paused' (its processes frozen) or 'stopped' (its container stopped, its
-- workspace volume kept), since state_at, for state_reason ("idle 30m",
-- "by request"). Rows from before are running. No CHECK on the values: the
-- store checks them, and a later state (archived) needs no table rebuild.
ALTER TABLE sandboxes ADD COLUMN state TEXT NOT NULL DEFAULT 'running';
ALTER TABLE sandboxes ADD COLUMN state_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';

-- An environment's own lifecycle policy, per org and environment name (the
-- built-in one included, which has no row in environments): how long a
-- sandbox idles before it is paused, stopped, removed. In milliseconds;
-- 0: the hub's default, -1: never.
CREATE TABLE sandbox_policies (
    org_id          TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    environment     TEXT   NOT NULL CHECK (environment <> ''),
    pause_after_ms  BIGINT NOT NULL DEFAULT 0 CHECK (pause_after_ms >= -1),
    stop_after_ms   BIGINT NOT NULL DEFAULT 0 CHECK (stop_after_ms >= -1),
    delete_after_ms BIGINT NOT NULL DEFAULT 0 CHECK (delete_after_ms >= -1),
    PRIMARY KEY (org_id, environment)
);

-- What the sandbox's /workspace held when last measured (du through its
-- agentd, before each pause and stop), in bytes, at workspace_at; -1: never
-- measured.
ALTER TABLE sandboxes ADD COLUMN workspace_bytes BIGINT NOT NULL DEFAULT -1;
ALTER TABLE sandboxes ADD COLUMN workspace_at BIGINT NOT NULL DEFAULT 0;
