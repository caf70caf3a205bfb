-- 000054's first resolutions: filled from the current ones, and indexed for the report,
-- which reads a workspace's range of days of them as it read the current ones (000025's
-- index, which nothing else reads, goes). One statement, the DDL through EXECUTE
-- (docs/scale.md).
DO $$
BEGIN
  UPDATE desk_conversation SET first_resolved_at = resolved_at WHERE resolved_at IS NOT NULL;
  EXECUTE 'CREATE INDEX desk_conversation_first_resolved_report_idx ON desk_conversation (org_id, first_resolved_at)
    INCLUDE (created_at, inbox_id) WHERE first_resolved_at IS NOT NULL';
  EXECUTE 'DROP INDEX IF EXISTS desk_conversation_resolved_report_idx';
END
$$;
