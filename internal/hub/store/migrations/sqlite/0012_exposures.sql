-- Ports exposed through the preview server (agentctl port expose). The
-- URL's token is stored as its SHA-256 only. expires_at NULL: until
-- unexposed.
CREATE TABLE exposures (
    id           TEXT    PRIMARY KEY,
    org_id       TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    machine_id   TEXT    NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    port         INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
    access       TEXT    NOT NULL CHECK (access IN ('private', 'org', 'public')),
    token_sha256 BLOB    NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    created_by   TEXT    NOT NULL,
    created_name TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX exposures_machine ON exposures (machine_id, port);
