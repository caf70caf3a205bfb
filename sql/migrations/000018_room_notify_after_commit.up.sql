-- Room messages are announced on rr_room after their transaction commits, by the rooms
-- service's notifier (one NOTIFY per room and batch), no longer by a trigger inside every
-- writer's transaction: a NOTIFY there holds Postgres' notify lock from the writer's
-- pre-commit to the end of its commit, so room writes committed one at a time (measured:
-- the trigger cost post_message about 12 % of its rate at 32 connections).
DROP TRIGGER room_message_notify ON room_message;
DROP FUNCTION rr_room_notify();
