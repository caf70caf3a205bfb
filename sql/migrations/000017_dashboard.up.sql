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
--    rr_project(), which is set only once the dashboard has checked the agreement.
CREATE POLICY guest ON project TO relayroom_app USING (
  EXISTS (SELECT 1 FROM agreement a WHERE a.project_id = project.id AND a.guest_org_id = rr_org())
);
CREATE POLICY guest ON organisation TO relayroom_app USING (
  EXISTS (SELECT 1 FROM agreement a JOIN project p ON p.id = a.project_id
          WHERE a.guest_org_id = rr_org() AND p.host_org_id = organisation.id)
);
