-- Environments: an org's custom sandbox images (the built-in sandbox and
-- paired machines are not stored here), and each org's default. Translated
-- from migrations/sqlite/0002_environments.sql.

CREATE TABLE environments (
    org_id     TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL CHECK (name <> ''),
    image      TEXT   NOT NULL CHECK (image <> ''),
    network    TEXT   NOT NULL CHECK (network IN ('public', 'none')),
    state      TEXT   NOT NULL CHECK (state IN ('validating', 'ready', 'rejected')),
    pinned     TEXT   NOT NULL DEFAULT '',
    reason     TEXT   NOT NULL DEFAULT '',
    report     TEXT   NOT NULL DEFAULT 'null',
    inventory  TEXT   NOT NULL DEFAULT 'null',
    -- the validation in progress: '' none, 'create', 'update', 'revalidate'
    running    TEXT   NOT NULL DEFAULT '',
    -- bumped when a validation starts; only that run may finish it
    generation BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, name)
);

CREATE TABLE org_defaults (
    org_id      TEXT NOT NULL PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    environment TEXT NOT NULL CHECK (environment <> '')
);

-- The sandboxes the hub runs: one per (org, environment, conversation), or
-- warm (started ahead, no conversation yet). The id is also the sandbox's
-- machine id; the container carries the same id in its labels.
CREATE TABLE sandboxes (
    id           TEXT    PRIMARY KEY,
    org_id       TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    environment  TEXT    NOT NULL,
    conversation TEXT    NOT NULL DEFAULT '',
    warm         INTEGER NOT NULL DEFAULT 0 CHECK (warm IN (0, 1)),
    image        TEXT    NOT NULL,
    container_id TEXT    NOT NULL DEFAULT '',
    hub          TEXT    NOT NULL DEFAULT '',
    created_at   BIGINT  NOT NULL,
    last_used_at BIGINT  NOT NULL
);
CREATE UNIQUE INDEX sandboxes_conversation ON sandboxes (org_id, environment, conversation) WHERE warm = 0;
CREATE INDEX sandboxes_warm ON sandboxes (org_id, environment, created_at) WHERE warm = 1;
