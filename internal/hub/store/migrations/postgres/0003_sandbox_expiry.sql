-- A sandbox may have an end fixed at creation (an agent run's TTL): it is
-- removed then, used or not. 0: none (conversations' sandboxes go when idle).
ALTER TABLE sandboxes ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
