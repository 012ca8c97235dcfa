-- Brokered secrets (issue 24): each org's CA, which the hub's egress proxy
-- signs its interception certificates with. The key stays here and in the
-- hub's memory; sandboxes get the certificate only. One row per org, made
-- on first use; both PEM.
CREATE TABLE org_cas (
    org_id     TEXT    NOT NULL PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    cert_pem   TEXT    NOT NULL,
    key_pem    TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
-- Private destinations (CIDR or host name, comma-separated) an
-- environment's sandboxes may reach besides the hub's own
-- --egress-allow-private list; '' for none.
ALTER TABLE environments ADD COLUMN allow_private TEXT NOT NULL DEFAULT '';
