-- State that hub replicas sharing one database must agree on.

-- A token bucket per key (pairing attempts per client address), stored as
-- the time (microseconds) at which the bucket is full again.
CREATE TABLE rate_limits (
    key     TEXT    PRIMARY KEY,
    full_at INTEGER NOT NULL
) STRICT;
