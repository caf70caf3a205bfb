-- rr_unverified: the cached caller's check fails by raising an error, not by clearing the
-- tenant (docs/tenancy.md, "Writes ride the check too").
--
-- The check (ScopeConfirmMember, AgentConfirmOwn) travels in the first round trip of the
-- call's first transaction, ahead of the tool's own statements. It used to fail by
-- finding no row and clearing the tenant settings, so that the statements pipelined after
-- it ran with no tenant and row-level security showed them nothing. That kept read tools
-- safe, but a write's statements still ran, and a COMMIT pipelined behind them (a
-- transaction whose statements were all queued) still committed whatever they could do
-- without a tenant. An error instead makes PostgreSQL skip everything after the check up
-- to the batch's end, the COMMIT included, and leaves the transaction aborted: nothing
-- sent after a failed check runs at all, which is what lets write tools send their
-- statements before the caller is settled. SQLSTATE RR001 is how the server recognises
-- it (pg.ErrUnverified).
--
-- VOLATILE, so the planner never evaluates it ahead of the row that decides; it returns
-- boolean only so that a condition can call it.
CREATE FUNCTION rr_unverified() RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $fn$
BEGIN
  RAISE EXCEPTION 'the credentials of this request did not verify'
    USING ERRCODE = 'RR001', HINT = 'the caller is resolved again without the scope cache';
END
$fn$;

REVOKE ALL ON FUNCTION rr_unverified() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_unverified() TO relayroom_app;
