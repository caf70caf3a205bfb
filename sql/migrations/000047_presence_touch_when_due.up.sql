-- rr_touch_presence: the cached caller's check moves presence (last_seen_at) only when it
-- is due (docs/performance.md, "The cached caller's check: presence moved only when
-- due").
--
-- ScopeConfirmMember and AgentConfirmOwn, which every call of a caller served from the
-- scope cache sends, moved presence with a data-modifying CTE (WITH touch AS (UPDATE …)).
-- PostgreSQL runs such a CTE on every execution, and starting an UPDATE (its target's
-- indexes opened, the presence view's join and its agreement subquery planned into it)
-- cost about as much Postgres CPU as everything else of the check together, although the
-- row is written at most once a second (membership_presence_due). The checks now read
-- the membership's last_seen_at and call this function only when it is a second old or
-- more: the same UPDATE, through the same view, so which rows move and when is unchanged.
--
-- member names the caller's membership in the tenant's project (rr_project()); NULL moves
-- every membership of the tenant's agent (rr_agent(), the all-rooms address). It returns
-- true, so that a check can call it in a condition. SECURITY INVOKER (the default): the
-- caller's row-level security applies as when the query named the tables itself. Citus
-- never calls it: the scope cache serves plain PostgreSQL only (internal/tenancy).
CREATE FUNCTION rr_touch_presence(member uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $fn$
BEGIN
  IF member IS NULL THEN
    UPDATE membership mm SET last_seen_at = now()
    FROM membership_presence_due d
    WHERE mm.agent_id = rr_agent() AND d.project_id = mm.project_id AND d.id = mm.id;
  ELSE
    UPDATE membership mm SET last_seen_at = now()
    FROM membership_presence_due d
    WHERE mm.project_id = rr_project() AND mm.id = member AND d.project_id = mm.project_id AND d.id = mm.id;
  END IF;
  RETURN true;
END
$fn$;

REVOKE ALL ON FUNCTION rr_touch_presence(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_touch_presence(uuid) TO relayroom_app;
