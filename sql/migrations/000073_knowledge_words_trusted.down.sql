-- 000011's trigger function: every entry's words.
CREATE OR REPLACE FUNCTION rr_knowledge_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO knowledge_word (project_id, word)
  SELECT NEW.project_id, w
  FROM unnest(tsvector_to_array(to_tsvector('simple', NEW.title || ' ' || NEW.body))) AS w
  WHERE length(w) BETWEEN 4 AND 40 AND w ~ '^[[:alpha:]]+$'
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END
$$;
