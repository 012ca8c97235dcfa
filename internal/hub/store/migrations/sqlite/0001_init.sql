-- The hub's first schema. Times are INTEGER microseconds since the Unix epoch,
-- UTC; NULL means "never". IDs are TEXT made by the hub.

CREATE TABLE orgs (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_tokens (
    id           TEXT    PRIMARY KEY,
    org_id       TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL CHECK (name <> ''),
    role         TEXT    NOT NULL CHECK (role IN ('admin', 'member')),
    sha256       BLOB    NOT NULL UNIQUE CHECK (length(sha256) = 32),
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX api_tokens_org ON api_tokens (org_id, created_at);
-- A name is the actor in activity: unique among an org's live tokens, free
-- again once the token is revoked (rotation).
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (org_id, name) WHERE revoked_at IS NULL;

CREATE TABLE pairing_codes (
    id              TEXT    PRIMARY KEY,
    org_id          TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    selector        BLOB    NOT NULL UNIQUE CHECK (length(selector) = 32),
    mac             BLOB    NOT NULL CHECK (length(mac) = 32),
    created_by      TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    used_at         INTEGER,
    used_by         TEXT    NOT NULL DEFAULT '', -- machine ID; history, so no foreign key
    used_from       TEXT    NOT NULL DEFAULT '',
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    locked_at       INTEGER
) STRICT;
CREATE INDEX pairing_codes_org ON pairing_codes (org_id, created_at);
CREATE INDEX pairing_codes_expires ON pairing_codes (expires_at);

CREATE TABLE machines (
    id           TEXT    PRIMARY KEY,
    org_id       TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    hostname     TEXT    NOT NULL,
    os           TEXT    NOT NULL,
    arch         TEXT    NOT NULL,
    version      TEXT    NOT NULL,
    public_key   BLOB    NOT NULL UNIQUE CHECK (length(public_key) = 32),
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER,
    revoked_at   INTEGER,
    -- the highest activity sequence number ever appended; survives pruning
    activity_seq INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX machines_org ON machines (org_id, created_at);

CREATE TABLE activity (
    id         INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a cursor
    org_id     TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    machine_id TEXT    NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    record     TEXT    NOT NULL,
    UNIQUE (machine_id, seq)
) STRICT;
CREATE INDEX activity_org ON activity (org_id, id);
CREATE INDEX activity_machine ON activity (machine_id, id);
CREATE INDEX activity_at ON activity (at);

-- One row, made by the hub when it first opens the store.
CREATE TABLE server_secret (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    secret BLOB    NOT NULL CHECK (length(secret) = 32)
) STRICT;
