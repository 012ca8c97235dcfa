-- State that hub replicas sharing one database must agree on.

-- A token bucket per key (pairing attempts per client address), stored as
-- the time (microseconds) at which the bucket is full again.
CREATE TABLE rate_limits (
    key     TEXT    PRIMARY KEY,
    full_at INTEGER NOT NULL
) STRICT;

-- The hub replicas serving from this database: each registers at start and
-- heartbeats; one silent past the time-to-live is deleted by the others,
-- and its routes with it.
CREATE TABLE replicas (
    id           TEXT    PRIMARY KEY,
    addr         TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
) STRICT;

-- Which replica holds each machine's tunnel.
CREATE TABLE routes (
    machine_id TEXT    PRIMARY KEY,
    replica_id TEXT    NOT NULL REFERENCES replicas (id) ON DELETE CASCADE,
    since      INTEGER NOT NULL
) STRICT;
CREATE INDEX routes_replica ON routes (replica_id);
