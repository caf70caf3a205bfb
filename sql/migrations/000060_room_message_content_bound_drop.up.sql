-- A task's response card carries the whole result after its prefix ("[task] Responded to
-- <goal>: <status>. "): a result may hold 20,000 characters (more once a secret in it is
-- masked), and the card was cut at the 20,000 a room message held, so the sender never
-- read the end of a long result. Room messages may now hold 50,000 characters
-- (post_message still takes at most 10,000, rooms.MaxPost): the old bound goes here and
-- the new one comes in 000061. Two files, since Citus runs no ALTER TABLE that adds a
-- constraint beside another subcommand.
ALTER TABLE room_message DROP CONSTRAINT room_message_content_check;
