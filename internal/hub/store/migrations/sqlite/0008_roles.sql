-- Ownership of the hub is a property of a token, not of an org: an owner
-- token (agenthub init's, or one made with 'admin token create --owner')
-- creates orgs and acts in any of them. Always an admin token.
ALTER TABLE api_tokens ADD COLUMN owner INTEGER NOT NULL DEFAULT 0 CHECK (owner IN (0, 1));
-- Until now every admin token of the first org acted as owner. The token
-- 'agenthub init' made is the first org's earliest admin token: it stays
-- the owner (the earliest one still live); the others lose their powers
-- over other orgs.
UPDATE api_tokens SET owner = 1 WHERE id = (
    SELECT t.id FROM api_tokens t
    WHERE t.role = 'admin' AND t.revoked_at IS NULL
      AND t.org_id = (SELECT o.id FROM orgs o ORDER BY o.created_at, o.id LIMIT 1)
    ORDER BY t.created_at, t.id LIMIT 1);

-- Whether an agent run's resolved secrets were delivered into a sandbox:
-- calls to it are for admins and the token that started it (token_id,
-- migration 7) only.
ALTER TABLE sandboxes ADD COLUMN holds_secrets INTEGER NOT NULL DEFAULT 0 CHECK (holds_secrets IN (0, 1));
