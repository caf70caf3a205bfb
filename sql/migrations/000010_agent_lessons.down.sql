DROP TABLE IF EXISTS agent_lesson;
CREATE INDEX IF NOT EXISTS knowledge_lesson_rate_idx ON knowledge (project_id, author_agent_id, created_at) WHERE source = 'lesson';
