-- The role relayroom_app is cluster-wide and may serve other databases: it is kept.
DROP TABLE IF EXISTS agreement, membership, connect_code, project, agent_key, agent,
  org_member, app_user, organisation;
DROP FUNCTION IF EXISTS rr_org(), rr_project(), rr_agent(), rr_lookup();
-- The extensions stay: other schemas in the database may use them, and dropping vector
-- would cascade into their columns.
