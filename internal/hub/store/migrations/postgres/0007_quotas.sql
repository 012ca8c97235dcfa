-- Quotas: the API token a sandbox counts against (the per-token cap; ''
-- for the hub's own), and an environment's workspace size limit in bytes
-- (0: the hub's --sandbox-workspace-max).
ALTER TABLE sandboxes ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
ALTER TABLE environments ADD COLUMN workspace_max BIGINT NOT NULL DEFAULT 0;
