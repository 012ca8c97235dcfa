-- Placeholder on branch registry only, so that its 0016 loads on its own:
-- delete it when merging (another branch owns this number).
SELECT 1;
