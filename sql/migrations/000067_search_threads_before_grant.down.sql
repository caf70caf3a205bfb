REVOKE EXECUTE ON FUNCTION rr_search_threads(uuid, text, integer, uuid) FROM relayroom_app;
