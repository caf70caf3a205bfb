CREATE FUNCTION rr_room_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('rr_room', NEW.project_id::text);
  RETURN NULL;
END
$$;
CREATE TRIGGER room_message_notify AFTER INSERT ON room_message
  FOR EACH ROW EXECUTE FUNCTION rr_room_notify();
