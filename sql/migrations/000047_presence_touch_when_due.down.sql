-- Drops rr_touch_presence: the checks of the binaries before 000047 moved presence with a
-- data-modifying CTE of their own (sql/queries: ScopeConfirmMember, AgentConfirmOwn).
DROP FUNCTION rr_touch_presence(uuid);
