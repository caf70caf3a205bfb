-- A room tab's history (AuditEventListByProject: the Memory, Tasks or Knowledge tab shows
-- the changes of every object of one kind in the room, newest first, audit.MaxHistory at
-- a time). audit_event_object leads with the object's id, which the tab does not have, so
-- without this index the tab read every row of the host's kind (every memory entry's
-- history of every room the host has) and sorted them. Rows outside a room (agents,
-- people, clients) have no project and are left out.
CREATE INDEX audit_event_project_idx ON audit_event (org_id, project_id, object_kind, at DESC, id DESC)
  WHERE project_id IS NOT NULL;
