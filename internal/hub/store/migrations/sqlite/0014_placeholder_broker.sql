-- Placeholder on branch broker only: 0014 belongs to another branch of
-- this session. Drop this file when merging (the other branch's takes it).
SELECT 1;
