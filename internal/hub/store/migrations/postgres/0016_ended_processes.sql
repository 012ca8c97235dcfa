-- The processes a lifecycle step of a sandbox ended (a stop, an archive, a
-- delete, a recreation from a new image): their records, as the sandbox's
-- agentd listed them just before (info: an agentd.v1.ProcessInfo as JSON),
-- with when and why they ended. ended_at 0: listed as the sandbox was
-- paused, not ended yet (a stop of the paused sandbox ends them; a resume
-- drops them). They go with their sandbox.
CREATE TABLE sandbox_processes (
    sandbox_id TEXT   NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    process_id TEXT   NOT NULL CHECK (process_id <> ''),
    info       TEXT   NOT NULL,
    ended_at   BIGINT NOT NULL DEFAULT 0,
    reason     TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (sandbox_id, process_id)
);
-- Leases: which replica runs a job that must run in one place at a time
-- (the archive store's GC), until when.
CREATE TABLE leases (
    name       TEXT   NOT NULL PRIMARY KEY,
    holder     TEXT   NOT NULL CHECK (holder <> ''),
    expires_at BIGINT NOT NULL
);
