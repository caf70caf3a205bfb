-- Events not folded yet are lost with the table: fold them first (the sweep does) if
-- their wakes matter.
DROP TABLE IF EXISTS wake_event;
