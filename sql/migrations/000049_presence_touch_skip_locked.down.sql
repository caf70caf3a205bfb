-- Restores 000047's rr_touch_presence, which waited for a membership another transaction
-- was touching.
CREATE OR REPLACE FUNCTION rr_touch_presence(member uuid) RETURNS boolean
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
