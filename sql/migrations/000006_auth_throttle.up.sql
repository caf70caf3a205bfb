-- Failed authentication counters (docs/auth-limits.md): how many refused credentials a
-- client address ('addr:<address>') or an agent key's public id ('key:<id>') presented in
-- its current fixed window. Every replica counts here, so a limit holds across all of them;
-- each replica also remembers the blocks it learns from the counts, in memory, and refuses
-- a blocked caller without coming back here.
--
-- Not tenant data, and deliberately no tenant column: a refused credential has no tenant
-- (that is why it was refused), and the same key id or address is counted for whichever
-- tenant it tried. internal/pg/catalog_test.go lists it as a service table: exempt from the
-- tenant-column rules, held to the RLS ones.
--
-- UNLOGGED: counters live for a window of a minute or so. A crash empties the table (an
-- attacker starts a fresh window, once), a standby does not hold it (after a failover the
-- counts start over), and in exchange a flood of refused credentials writes no WAL and
-- ships nothing to replicas.
CREATE UNLOGGED TABLE auth_throttle (
  subject      text PRIMARY KEY CHECK (subject ~ '^(addr|key):.' AND length(subject) <= 100),
  window_start timestamptz NOT NULL,
  failures     integer NOT NULL CHECK (failures > 0)
);
-- The prune job deletes ended windows.
CREATE INDEX auth_throttle_window_start ON auth_throttle (window_start);

-- The request role sees and writes exactly the subjects it names in app.lookup, as
-- authentication does for key and connect-code rows: it cannot list who else is counted.
-- The subject prefixes keep these names apart from credential ids (which have no colon).
ALTER TABLE auth_throttle ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth_throttle FORCE ROW LEVEL SECURITY;
CREATE POLICY lookup ON auth_throttle TO relayroom_app USING (subject = ANY (rr_lookup()));
DO $$
BEGIN
  EXECUTE format('CREATE POLICY operator ON auth_throttle TO %I USING (true) WITH CHECK (true)', current_user);
END
$$;

-- No DELETE: ended windows are pruned by the owner (the ops pool).
GRANT SELECT, INSERT, UPDATE ON auth_throttle TO relayroom_app;
