DROP INDEX IF EXISTS audit_event_project_idx;
