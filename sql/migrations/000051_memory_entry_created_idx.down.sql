DROP INDEX IF EXISTS memory_entry_created_idx;
