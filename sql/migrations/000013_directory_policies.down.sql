-- The directory tables' policies of 000001, with their subqueries.
ALTER POLICY tenant ON organisation USING (
  id = rr_org()
  OR EXISTS (SELECT 1 FROM project p WHERE p.id = rr_project() AND p.host_org_id = organisation.id)
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = rr_project() AND m.org_id = organisation.id)
  OR EXISTS (SELECT 1 FROM membership m JOIN project p ON p.id = m.project_id
             WHERE m.agent_id = rr_agent() AND p.host_org_id = organisation.id)
);
ALTER POLICY tenant ON app_user USING (
  EXISTS (SELECT 1 FROM org_member om WHERE om.user_id = app_user.id AND om.org_id = rr_org())
);
ALTER POLICY tenant ON agent USING (
  org_id = rr_org()
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = rr_project() AND m.agent_id = agent.id)
);
ALTER POLICY tenant ON project USING (
  id = rr_project()
  OR host_org_id = rr_org()
  OR EXISTS (SELECT 1 FROM membership m WHERE m.project_id = project.id AND m.agent_id = rr_agent())
);

DROP FUNCTION rr_set_directory();
DROP FUNCTION rr_orgs();
DROP FUNCTION rr_projects();
DROP FUNCTION rr_agents();
DROP FUNCTION rr_users();
