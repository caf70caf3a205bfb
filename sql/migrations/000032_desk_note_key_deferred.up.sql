-- A private note's idempotency key references its note (desk_note_key → desk_message),
-- and DeskNoteClaim writes both in one statement: the key first (its claim decides
-- whether the note is written at all), then the note, in a second CTE. PostgreSQL checks
-- the key at the end of the whole statement, when the note exists; a Citus coordinator
-- runs each data-modifying CTE as a statement of its own on the worker, so the key was
-- checked before its note existed and every note failed (a foreign key violation, an
-- internal error to the client). Checked at COMMIT instead, the key holds on both: a
-- transaction that commits a key has committed its note.
--
-- One DO block with a statement per EXECUTE: on a distributed database Citus sends the
-- workers the text of the statement that adds a foreign key, and refuses a text holding
-- several (a file of two ALTER TABLEs), an ALTER CONSTRAINT, and an ALTER TABLE that
-- drops and adds in one.
DO $$
BEGIN
  EXECUTE 'ALTER TABLE desk_note_key DROP CONSTRAINT desk_note_key_org_id_message_id_fkey';
  EXECUTE 'ALTER TABLE desk_note_key ADD CONSTRAINT desk_note_key_org_id_message_id_fkey
    FOREIGN KEY (org_id, message_id) REFERENCES desk_message (org_id, id) ON DELETE CASCADE
    DEFERRABLE INITIALLY DEFERRED';
END
$$;
