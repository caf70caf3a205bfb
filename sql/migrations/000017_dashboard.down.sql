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
  SELECT array_agg(om.user_id ORDER BY om.user_id) INTO users FROM org_member om WHERE om.org_id = org;
  EXECUTE format('SET LOCAL app.orgs = %L', coalesce(orgs::text, ''));
  EXECUTE format('SET LOCAL app.projects = %L', coalesce(projects::text, ''));
  EXECUTE format('SET LOCAL app.agents = %L', coalesce(agents::text, ''));
  EXECUTE format('SET LOCAL app.users = %L', coalesce(users::text, ''));
END
$fn$;
DROP TRIGGER room_message_notify ON room_message;
DROP FUNCTION rr_room_notify();
ALTER TABLE memory_entry DROP COLUMN deprecated_by_name, DROP COLUMN deprecated_by_user_id;
