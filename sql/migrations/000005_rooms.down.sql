DROP FUNCTION IF EXISTS rr_memory_lexical(text, text, text, text[], int);
DROP TABLE IF EXISTS room_message;
DROP TABLE IF EXISTS task_attachment;
DROP TABLE IF EXISTS room_task;
DROP TABLE IF EXISTS memory_vector;
DROP TABLE IF EXISTS memory_entry;
