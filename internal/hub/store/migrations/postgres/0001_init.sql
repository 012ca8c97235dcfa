-- The hub's first schema, translated from migrations/sqlite/0001_init.sql.
-- Times are BIGINT microseconds since the Unix epoch, UTC, as on SQLite (one
-- Go code path for both stores); NULL means "never". IDs are TEXT made by the
-- hub.

CREATE TABLE orgs (
    id         TEXT   PRIMARY KEY,
    name       TEXT   NOT NULL UNIQUE CHECK (name <> ''),
    created_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id           TEXT   PRIMARY KEY,
    org_id       TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         TEXT   NOT NULL CHECK (name <> ''),
    role         TEXT   NOT NULL CHECK (role IN ('admin', 'member')),
    sha256       BYTEA  NOT NULL UNIQUE CHECK (octet_length(sha256) = 32),
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX api_tokens_org ON api_tokens (org_id, created_at);
-- A name is the actor in activity: unique among an org's live tokens, free
-- again once the token is revoked (rotation).
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (org_id, name) WHERE revoked_at IS NULL;

CREATE TABLE pairing_codes (
    id              TEXT    PRIMARY KEY,
    org_id          TEXT    NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    selector        BYTEA   NOT NULL UNIQUE CHECK (octet_length(selector) = 32),
    mac             BYTEA   NOT NULL CHECK (octet_length(mac) = 32),
    created_by      TEXT    NOT NULL,
    created_at      BIGINT  NOT NULL,
    expires_at      BIGINT  NOT NULL,
    used_at         BIGINT,
    used_by         TEXT    NOT NULL DEFAULT '', -- machine ID; history, so no foreign key
    used_from       TEXT    NOT NULL DEFAULT '',
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    locked_at       BIGINT
);
CREATE INDEX pairing_codes_org ON pairing_codes (org_id, created_at);
CREATE INDEX pairing_codes_expires ON pairing_codes (expires_at);

CREATE TABLE machines (
    id           TEXT   PRIMARY KEY,
    org_id       TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name         TEXT   NOT NULL,
    hostname     TEXT   NOT NULL,
    os           TEXT   NOT NULL,
    arch         TEXT   NOT NULL,
    version      TEXT   NOT NULL,
    public_key   BYTEA  NOT NULL UNIQUE CHECK (octet_length(public_key) = 32),
    created_at   BIGINT NOT NULL,
    last_seen_at BIGINT,
    revoked_at   BIGINT,
    -- the highest activity sequence number ever appended; survives pruning
    activity_seq BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX machines_org ON machines (org_id, created_at);

CREATE TABLE activity (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- never reused: a cursor
    org_id     TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    machine_id TEXT   NOT NULL REFERENCES machines (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    at         BIGINT NOT NULL,
    record     TEXT   NOT NULL,
    UNIQUE (machine_id, seq)
);
CREATE INDEX activity_org ON activity (org_id, id);
CREATE INDEX activity_machine ON activity (machine_id, id);
CREATE INDEX activity_at ON activity (at);

-- One row, made by the hub when it first opens the store.
CREATE TABLE server_secret (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    secret BYTEA   NOT NULL CHECK (octet_length(secret) = 32)
);
