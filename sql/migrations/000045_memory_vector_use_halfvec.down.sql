-- The USE embedder's HNSW index as 000028 made it: full precision, pgvector's default
-- build parameters.
-- Each statement through EXECUTE: on a distributed database Citus sends index DDL to the
-- workers as the text of the command that held it, and this file is one multi-statement
-- command ("cannot insert multiple commands into a prepared statement" on every worker;
-- docs/scale.md). EXECUTE gives each statement a text of its own.
DO $do$ BEGIN
  EXECUTE 'DROP INDEX IF EXISTS memory_vector_use_hnsw';
  EXECUTE $q$CREATE INDEX memory_vector_use_hnsw ON memory_vector
    USING hnsw ((embedding::vector(512)) vector_cosine_ops)
    WHERE embedder = 'builtin-use-lite-v1' AND embedding IS NOT NULL$q$;
END $do$;
