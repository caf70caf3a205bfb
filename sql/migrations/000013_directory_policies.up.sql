-- The directory tables' row-level security without subqueries.
--
-- organisation, project, agent and app_user decided visibility with EXISTS subqueries over
-- membership, project and org_member, evaluated for every row a query touched: a request's
-- part binding planned in 6–10 ms and ran 4× slower than without RLS, and Citus refuses
-- subqueries in policies on reference and distributed tables. The same sets are now
-- computed once, when a request's credential is bound (rr_set_directory, SECURITY
-- DEFINER, keyed only by the tenant settings, so it admits the rows the old policies
-- showed for them), read back by the bind statement, carried in the request's Scope and
-- set with every later transaction's tenant (internal/pg: app.orgs,
-- app.projects, app.agents, app.users; a uuid[] literal each). Each policy compares a row
-- with the settings alone. Unset settings match nothing: fail closed.
--
-- What each table shows the request role, as before:
--   organisation  its own; the current project's host and every organisation with a member
--                 in it; the hosts of every project its agent is a member of
--   project       the current one; those its organisation hosts; those its agent is in
--   agent         its organisation's; the current project's members
--   app_user      the people of its organisation

CREATE FUNCTION rr_orgs() RETURNS uuid[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.orgs', true), '')::uuid[] $$;
CREATE FUNCTION rr_projects() RETURNS uuid[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.projects', true), '')::uuid[] $$;
CREATE FUNCTION rr_agents() RETURNS uuid[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.agents', true), '')::uuid[] $$;
CREATE FUNCTION rr_users() RETURNS uuid[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.users', true), '')::uuid[] $$;
GRANT EXECUTE ON FUNCTION rr_orgs(), rr_projects(), rr_agents(), rr_users() TO relayroom_app;

ALTER POLICY tenant ON organisation USING (id = rr_org() OR id = ANY (rr_orgs()));
ALTER POLICY tenant ON project USING (id = rr_project() OR host_org_id = rr_org() OR id = ANY (rr_projects()));
ALTER POLICY tenant ON agent USING (org_id = rr_org() OR id = ANY (rr_agents()));
ALTER POLICY tenant ON app_user USING (id = ANY (rr_users()));

-- Sets app.orgs, app.projects, app.agents and app.users for the rest of the transaction
-- to what the tenant settings (rr_org, rr_project, rr_agent) may see beyond their own
-- organisation, project and organisation's agents, as the policies of 000001 decided it
-- with their subqueries. One difference, narrower: the current project's members (their
-- agents and organisations) are included only while rr_org() is admitted to it (the host,
-- or a guest under an active agreement), as the service keeps a refused guest's project
-- out of its tenant (tenancy.Scope.Tenant). Returns nothing: the bind statement that
-- follows reads the settings back (rr_orgs() …). internal/pg runs it with the settings
-- of any transaction whose tenant comes without these lists.
CREATE FUNCTION rr_set_directory() RETURNS void
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
    SELECT p.host_org_id = org OR EXISTS (SELECT 1 FROM agreement ag
             WHERE ag.project_id = p.id AND ag.guest_org_id = org AND ag.status = 'active')
      INTO admitted FROM project p WHERE p.id = proj;
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
  PERFORM set_config('app.orgs', coalesce(orgs::text, ''), true),
    set_config('app.projects', coalesce(projects::text, ''), true),
    set_config('app.agents', coalesce(agents::text, ''), true),
    set_config('app.users', coalesce(users::text, ''), true);
END
$fn$;
REVOKE ALL ON FUNCTION rr_set_directory() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_set_directory() TO relayroom_app;
