-- Drops rr_unverified: the checks of the binaries before 000048 failed by clearing the
-- tenant (sql/queries: ScopeConfirmMember, AgentConfirmOwn), and their write tools
-- settled the caller before sending anything.
DROP FUNCTION rr_unverified();
