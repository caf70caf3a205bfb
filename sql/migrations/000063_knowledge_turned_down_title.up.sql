-- learn links a new entry to a demoted or rejected one of the same title and text, so the
-- people reviewing it see it was turned down before (docs/knowledge.md, "Near-duplicates").
-- The near-duplicate check's trigram index covers live entries only; this one finds the
-- turned-down entries of one exact title.
CREATE INDEX knowledge_turned_down_title_idx ON knowledge (project_id, title) WHERE status IN ('demoted', 'rejected');
