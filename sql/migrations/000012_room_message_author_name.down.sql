ALTER TABLE room_message DROP COLUMN IF EXISTS author_name;
