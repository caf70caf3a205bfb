ALTER TABLE desk_conversation DROP COLUMN IF EXISTS first_resolved_at;
