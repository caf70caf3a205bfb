-- One statement, the DDL through EXECUTE, as the up migration (docs/scale.md).
DO $$
BEGIN
  EXECUTE 'CREATE INDEX IF NOT EXISTS desk_conversation_resolved_report_idx ON desk_conversation (org_id, resolved_at)
    INCLUDE (created_at, inbox_id) WHERE resolved_at IS NOT NULL';
  EXECUTE 'DROP INDEX IF EXISTS desk_conversation_first_resolved_report_idx';
END
$$;
