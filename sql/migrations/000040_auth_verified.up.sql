-- Credentials a replica has verified, shared with every replica (docs/auth-limits.md).
-- A key id blocked by someone guessing at it stays open to its holder: a credential the
-- database accepted recently passes its key id's block. Each replica remembered that in
-- its own memory only, so behind a load balancer the holder was refused by every replica
-- it had not yet called. A replica records here the SHA-256 of an agent key it accepted
-- (what the key's own table stores already: agent keys carry 190 random bits, so a fast
-- hash reveals nothing), and a replica that learns a key id's block reads that key id's
-- rows. A password is never recorded (its fast hash could be guessed offline): a sign-in's
-- pass stays the replica's that checked it.
--
-- Not tenant data, like auth_throttle: it is read before any tenant is known and keyed by
-- the key id's subject ('key:<id>', the throttle's own name for it). internal/pg's catalog
-- test lists it as a service table: exempt from the tenant-column rules, held to the RLS
-- ones. On Citus it stays a plain table of the coordinator (relayroom migrate citus).
--
-- Bounded and expiring: a row exists only for a credential the database accepted (a
-- guesser cannot add one), one per key id and credential, and lives until verified_until
-- (the throttle's verifiedFor, ten minutes from its last refresh); the throttle's prune job
-- deletes ended rows. UNLOGGED for the reason auth_throttle is: losing it in a crash costs
-- each holder one more verification per replica, and it writes no WAL.
CREATE UNLOGGED TABLE auth_verified (
  subject         text NOT NULL CHECK (subject ~ '^key:.' AND length(subject) <= 100),
  credential_hash bytea NOT NULL CHECK (length(credential_hash) = 32),
  verified_until  timestamptz NOT NULL,
  PRIMARY KEY (subject, credential_hash)
);
-- The prune job deletes ended rows.
CREATE INDEX auth_verified_until ON auth_verified (verified_until);

-- The request role sees and writes exactly the key ids it names in app.lookup, as for
-- auth_throttle: it cannot list which credentials were verified.
ALTER TABLE auth_verified ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth_verified FORCE ROW LEVEL SECURITY;
CREATE POLICY lookup ON auth_verified TO relayroom_app USING (subject = ANY (rr_lookup()));
DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON auth_verified TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;

-- No DELETE: ended rows are pruned by the owner (the ops pool).
GRANT SELECT, INSERT, UPDATE ON auth_verified TO relayroom_app;
