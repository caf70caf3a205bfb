-- The people's dashboard (docs/dashboard.md).
--
-- 1. A memory entry deprecated by a person keeps who did it, beside when (deprecated_at):
--    entries are never deleted, and the Memory tab shows who retired one.
ALTER TABLE memory_entry
  ADD COLUMN deprecated_by_user_id uuid REFERENCES app_user (id) ON DELETE SET NULL,
  ADD COLUMN deprecated_by_name text CHECK (length(deprecated_by_name) <= 200);

-- 2. Every new room message (a post, a memory card, a task card) is announced on the
--    channel rr_room with its project id as the payload, whoever wrote it and on whichever
--    replica: each replica's dashboard listens and tells the pages of that room to fetch
--    what is new through the rooms service (the payload carries no content, so nothing
--    crosses a tenant through the channel). A trigger rather than a call in Go, so that
--    no writer (a tool, the admin CLI, a future job) can forget it.
CREATE FUNCTION rr_room_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rr_room', NEW.project_id::text);
  RETURN NULL;
END
$$;
CREATE TRIGGER room_message_notify AFTER INSERT ON room_message
  FOR EACH ROW EXECUTE FUNCTION rr_room_notify();

-- 3. A person of a guest company lists the rooms their company has an agreement for (in
--    any state: a guest's admin accepts a pending one) and reads the host's name. Agents
--    see a project through their membership; a person has none, so the agreement is what
--    shows it. Nothing else of the project becomes visible: its rows stay behind
--    rr_project(), which is set only once the dashboard has checked the agreement. The
--    directory's visible sets (rr_set_directory) carry it, not a policy with a subquery:
--    policies compare a row with the transaction's settings only (000013).
CREATE OR REPLACE FUNCTION rr_set_directory() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  org  uuid := rr_org();
  proj uuid := rr_project();
  agt  uuid := rr_agent();
  admitted boolean := false;
  orgs uuid[];
  projects uuid[];
  agents uuid[];
  users uuid[];
BEGIN
  -- A tenant of a project and no organisation (a project's CI token, a signed download
  -- link) acts for the project itself and sees its members, as before.
  IF proj IS NOT NULL AND org IS NULL THEN
    admitted := true;
  ELSIF proj IS NOT NULL THEN
    SELECT p.host_org_id = org INTO admitted FROM project p WHERE p.id = proj;
    IF FOUND AND NOT admitted THEN
      admitted := EXISTS (SELECT 1 FROM agreement ag
                          WHERE ag.project_id = proj AND ag.guest_org_id = org AND ag.status = 'active');
    END IF;
  END IF;
  SELECT array_agg(DISTINCT x.o ORDER BY x.o) INTO orgs FROM (
    SELECT p.host_org_id AS o FROM project p WHERE admitted AND p.id = proj
    UNION ALL
    SELECT m.org_id FROM membership m WHERE admitted AND m.project_id = proj
    UNION ALL
    SELECT p.host_org_id FROM membership m JOIN project p ON p.id = m.project_id WHERE m.agent_id = agt) x;
  IF admitted THEN
    SELECT array_agg(m.agent_id ORDER BY m.agent_id) INTO agents FROM membership m WHERE m.project_id = proj;
  END IF;
  SELECT array_agg(m.project_id ORDER BY m.project_id) INTO projects FROM membership m WHERE m.agent_id = agt;
  -- A person (an organisation and no agent: the dashboard) also sees the rooms their
  -- organisation has an agreement for, in any state (a guest's admin accepts a pending
  -- one), and those rooms' hosts. An agent sees rooms through its memberships only.
  IF org IS NOT NULL AND agt IS NULL THEN
    SELECT array_agg(DISTINCT x ORDER BY x) INTO projects FROM (
      SELECT unnest(projects) AS x
      UNION SELECT ag.project_id FROM agreement ag WHERE ag.guest_org_id = org) u;
    SELECT array_agg(DISTINCT x ORDER BY x) INTO orgs FROM (
      SELECT unnest(orgs) AS x
      UNION SELECT p.host_org_id FROM agreement ag JOIN project p ON p.id = ag.project_id
            WHERE ag.guest_org_id = org) u;
  END IF;
  SELECT array_agg(om.user_id ORDER BY om.user_id) INTO users FROM org_member om WHERE om.org_id = org;
  EXECUTE format('SET LOCAL app.orgs = %L', coalesce(orgs::text, ''));
  EXECUTE format('SET LOCAL app.projects = %L', coalesce(projects::text, ''));
  EXECUTE format('SET LOCAL app.agents = %L', coalesce(agents::text, ''));
  EXECUTE format('SET LOCAL app.users = %L', coalesce(users::text, ''));
END
$fn$;
