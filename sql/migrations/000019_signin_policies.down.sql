ALTER POLICY signin ON app_user USING (
  email = ANY (rr_lookup())
  OR EXISTS (SELECT 1 FROM web_session s WHERE s.user_id = app_user.id AND s.session_id = ANY (rr_lookup()))
);
ALTER POLICY signin ON org_member USING (
  EXISTS (SELECT 1 FROM web_session s WHERE s.user_id = org_member.user_id AND s.session_id = ANY (rr_lookup()))
);
ALTER POLICY lookup ON oauth_client USING (
  client_id = ANY (rr_lookup())
  OR EXISTS (SELECT 1 FROM oauth_auth_request r WHERE r.client_id = oauth_client.client_id AND r.id = ANY (rr_lookup()))
  OR EXISTS (SELECT 1 FROM oauth_grant g WHERE g.client_id = oauth_client.client_id AND g.org_id = rr_org())
);
DROP FUNCTION rr_set_signin();
DROP FUNCTION rr_signin_users();
DROP FUNCTION rr_signin_clients();
