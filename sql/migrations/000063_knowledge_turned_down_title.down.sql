DROP INDEX IF EXISTS knowledge_turned_down_title_idx;
