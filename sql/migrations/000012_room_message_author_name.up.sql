-- A person's name as their room messages show it, kept with the message. The listing
-- read it from app_user, whose row-level security shows a person only to their own
-- organisation, so a guest company saw a host person's message as "Human". The name is
-- the one the person had when they posted, like any chat's record.
ALTER TABLE room_message ADD COLUMN author_name text CHECK (length(author_name) <= 200);
UPDATE room_message rm SET author_name = u.name
FROM app_user u WHERE u.id = rm.author_user_id AND rm.author_name IS NULL;
