-- rr_search_threads with its cursor (000066) is the request role's only, as the old one.
-- One statement, the two grants through EXECUTE (docs/scale.md).
DO $do$
BEGIN
  EXECUTE 'REVOKE ALL ON FUNCTION rr_search_threads(uuid, text, integer, uuid) FROM PUBLIC';
  EXECUTE 'GRANT EXECUTE ON FUNCTION rr_search_threads(uuid, text, integer, uuid) TO relayroom_app';
END
$do$;
