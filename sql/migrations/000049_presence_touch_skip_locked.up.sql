-- rr_touch_presence skips a membership another transaction is touching instead of waiting
-- for it (docs/performance.md, "Presence touched without a convoy").
--
-- Presence moves at most once a second (membership_presence_due), but when the second
-- turns, every concurrent call of the same part reads the old last_seen_at and calls this
-- function at once. The first UPDATE locks the row until its transaction commits; the
-- others queued behind that lock, and because their join to membership_presence_due had
-- already found the row due, each then updated it again in turn: a chain of row-lock
-- waits, one a second, as long as the part's concurrent calls (in a write's transaction,
-- which holds the lock across its own statements, the largest wait of the write path:
-- Lock:transactionid and Lock:tuple on the cached caller's check).
--
-- Now the rows are locked first with SKIP LOCKED: a membership another transaction holds
-- (it is being touched, or changed, right now) is left alone, since that transaction moves
-- it or the next call a second later will. The UPDATE that follows is a statement of its
-- own, so it reads the latest committed last_seen_at: a touch committed a moment ago
-- makes the row not due, and it is not written twice. Which rows move and when is
-- otherwise unchanged: the same view decides.
--
-- FOR NO KEY UPDATE is the lock the UPDATE itself takes: it does not conflict with the
-- key-share locks that inserts referencing membership take, so those never make a touch
-- skip. member and the return value are as in 000047; Citus never calls it.
CREATE OR REPLACE FUNCTION rr_touch_presence(member uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = public, pg_temp AS $fn$
DECLARE
  held uuid[];
BEGIN
  IF member IS NULL THEN
    -- Only the due ones are locked: the agent's other rooms are not written, so their
    -- rows are left for their own calls.
    SELECT array_agg(l.id) INTO held FROM (
      SELECT mm.id FROM membership mm
      JOIN membership_presence_due d ON d.project_id = mm.project_id AND d.id = mm.id
      WHERE mm.agent_id = rr_agent()
      FOR NO KEY UPDATE OF mm SKIP LOCKED) l;
    IF held IS NULL THEN
      RETURN true;
    END IF;
    UPDATE membership mm SET last_seen_at = now()
    FROM membership_presence_due d
    WHERE mm.agent_id = rr_agent() AND mm.id = ANY (held)
      AND d.project_id = mm.project_id AND d.id = mm.id;
  ELSE
    PERFORM 1 FROM membership mm WHERE mm.project_id = rr_project() AND mm.id = member
      FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      RETURN true;
    END IF;
    UPDATE membership mm SET last_seen_at = now()
    FROM membership_presence_due d
    WHERE mm.project_id = rr_project() AND mm.id = member AND d.project_id = mm.project_id AND d.id = mm.id;
  END IF;
  RETURN true;
END
$fn$;
