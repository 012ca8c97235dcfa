-- Allow lists that change while a sandbox runs (agentctl sandbox allow |
-- deny): the list now, its generation (1 as the sandbox was made, one more
-- per change) and the generation of the latest change that cut open
-- connections. Only sandboxes made with an allow list have a row.
CREATE TABLE sandbox_egress (
    sandbox_id     TEXT    NOT NULL PRIMARY KEY REFERENCES sandboxes (id) ON DELETE CASCADE,
    allow          TEXT    NOT NULL DEFAULT '',
    generation     INTEGER NOT NULL CHECK (generation >= 1),
    cut_generation INTEGER NOT NULL DEFAULT 0 CHECK (cut_generation >= 0),
    changed_at     INTEGER NOT NULL DEFAULT 0
) STRICT;
-- An environment's allow list for its new sandboxes (agentctl env set NAME
-- --allow …), the built-in environment's included: a table rather than a
-- column of environments, which has no row for builtin.
CREATE TABLE environment_egress (
    org_id      TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    environment TEXT NOT NULL CHECK (environment <> ''),
    allow       TEXT NOT NULL CHECK (allow <> ''),
    PRIMARY KEY (org_id, environment)
) STRICT;
