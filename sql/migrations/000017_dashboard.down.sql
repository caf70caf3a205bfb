DROP POLICY guest ON organisation;
DROP POLICY guest ON project;
DROP TRIGGER room_message_notify ON room_message;
DROP FUNCTION rr_room_notify();
ALTER TABLE memory_entry DROP COLUMN deprecated_by_name, DROP COLUMN deprecated_by_user_id;
