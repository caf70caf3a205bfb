-- As in the up migration: one statement per EXECUTE, for Citus.
DO $$
BEGIN
  EXECUTE 'ALTER TABLE desk_note_key DROP CONSTRAINT desk_note_key_org_id_message_id_fkey';
  EXECUTE 'ALTER TABLE desk_note_key ADD CONSTRAINT desk_note_key_org_id_message_id_fkey
    FOREIGN KEY (org_id, message_id) REFERENCES desk_message (org_id, id) ON DELETE CASCADE';
END
$$;
