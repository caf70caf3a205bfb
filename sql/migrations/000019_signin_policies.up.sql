-- The sign-in policies of 000015 without subqueries (docs/auth.md, docs/scale.md).
--
-- app_user.signin, org_member.signin and oauth_client.lookup read web_session,
-- oauth_auth_request and oauth_grant in EXISTS subqueries, evaluated for every row a query
-- touched, and Citus refuses subqueries in policies on distributed and reference tables
-- (app_user and oauth_client are reference tables, org_member is sharded by org_id). As
-- 000013 did for the directory tables, the sets are now computed once, when a transaction
-- names sign-in credentials (rr_set_signin, SECURITY DEFINER, keyed only by app.lookup and
-- app.org_id), kept in transaction-local settings (app.signin_users: uuid[];
-- app.signin_clients: text[]) and compared with each row. internal/pg runs it with the
-- settings of a tenant marked SignIn, and clears both settings with every other tenant.
-- Unset settings match nothing: fail closed.
--
-- What each policy shows the request role (never more than 000015 did):
--   app_user    the person whose email is named (signing in); the person of a live
--               session named in app.lookup
--   org_member  the memberships of the person of a live session named in app.lookup
--   oauth_client  a client named in app.lookup; the client of a pending authorization
--               request named there (the consent page shows its name); the client of a
--               grant named there under the grant's organisation (tokens end with their
--               client). 000015 showed every client with a grant in the tenant's
--               organisation, and any session or request, expired or not: narrower now.

CREATE FUNCTION rr_signin_users() RETURNS uuid[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.signin_users', true), '')::uuid[] $$;
CREATE FUNCTION rr_signin_clients() RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('app.signin_clients', true), '')::text[] $$;
GRANT EXECUTE ON FUNCTION rr_signin_users(), rr_signin_clients() TO relayroom_app;

-- Sets app.signin_users and app.signin_clients for the rest of the transaction to what
-- the ids named in app.lookup show: the person of each live session, the client of each
-- live pending request, and the client of each grant of the tenant's organisation (a
-- grant is named by its id). SET LOCAL rather than set_config: Citus replays a
-- transaction's SET LOCAL commands on its workers and nothing set_config does (000016).
CREATE FUNCTION rr_set_signin() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
  named  text[] := coalesce(rr_lookup(), '{}');
  org    uuid := rr_org();
  grants uuid[];
  users  uuid[];
  clients text[];
BEGIN
  SELECT array_agg(n::uuid) INTO grants FROM unnest(named) n
  WHERE n ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
  SELECT array_agg(DISTINCT s.user_id ORDER BY s.user_id) INTO users
  FROM web_session s WHERE s.session_id = ANY (named) AND s.expires_at > now();
  SELECT array_agg(DISTINCT x.c ORDER BY x.c) INTO clients FROM (
    SELECT r.client_id AS c FROM oauth_auth_request r WHERE r.id = ANY (named) AND r.expires_at > now()
    UNION ALL
    SELECT g.client_id FROM oauth_grant g WHERE org IS NOT NULL AND g.org_id = org AND g.id = ANY (grants)) x;
  EXECUTE format('SET LOCAL app.signin_users = %L', coalesce(users::text, ''));
  EXECUTE format('SET LOCAL app.signin_clients = %L', coalesce(clients::text, ''));
END
$fn$;
REVOKE ALL ON FUNCTION rr_set_signin() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rr_set_signin() TO relayroom_app;

ALTER POLICY signin ON app_user USING (email = ANY (rr_lookup()) OR id = ANY (rr_signin_users()));
ALTER POLICY signin ON org_member USING (user_id = ANY (rr_signin_users()));
ALTER POLICY lookup ON oauth_client USING (client_id = ANY (rr_lookup()) OR client_id = ANY (rr_signin_clients()));
