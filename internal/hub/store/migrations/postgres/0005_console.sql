-- The web console's sign-ins. Only SHA-256 hashes of session ids and of
-- one-time links are stored. A session made with an API token names it by
-- its hash, so the hub ends the session when the token is revoked; one made
-- with a console link (the hub owner's) has no token.
CREATE TABLE console_sessions (
    sha256       BYTEA  PRIMARY KEY CHECK (octet_length(sha256) = 32),
    org_id       TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    token_sha256 BYTEA  REFERENCES api_tokens (sha256) ON DELETE CASCADE,
    name         TEXT   NOT NULL CHECK (name <> ''),
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

CREATE TABLE console_links (
    sha256     BYTEA  PRIMARY KEY CHECK (octet_length(sha256) = 32),
    org_id     TEXT   NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX console_links_expiry ON console_links (expires_at);
