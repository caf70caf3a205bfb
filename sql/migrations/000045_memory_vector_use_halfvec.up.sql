-- The USE embedder's HNSW index in half precision (docs/rooms.md, "Memory";
-- docs/performance.md, "The USE index in half precision"). Every vector RunEmbedder
-- stores is inserted into this index, and that insert was most of the vector's Postgres
-- CPU (4.2–5.3 ms at 10,000 vectors with 000028's full-precision index). The index now
-- holds each vector as halfvec(512) (2 bytes a dimension: half the pages, half the bytes
-- read per distance) and is built with ef_construction 32 instead of pgvector's 64 (m
-- stays 16; 32 is the least pgvector accepts with it): about half the insert's CPU. The
-- column keeps the full vector and the search reports the full vector's cosine, so only
-- the choice of candidates is approximate; the search's longer candidate list (ef_search
-- 80, internal/rooms/memory.go hnswIndexed) keeps its recall at the old index's. The
-- search casts to the same type, or the planner does not use the index.
--
-- The name stays: it is the USE embedder's index whatever its type. Building it holds
-- memory_vector's writes (and, through the DROP, its reads) until the migration commits:
-- a few seconds at 10,000 vectors.
-- Each statement through EXECUTE: on a distributed database Citus sends index DDL to the
-- workers as the text of the command that held it, and this file is one multi-statement
-- command ("cannot insert multiple commands into a prepared statement" on every worker;
-- docs/scale.md). EXECUTE gives each statement a text of its own.
DO $do$ BEGIN
  EXECUTE 'DROP INDEX IF EXISTS memory_vector_use_hnsw';
  EXECUTE $q$CREATE INDEX memory_vector_use_hnsw ON memory_vector
    USING hnsw ((embedding::halfvec(512)) halfvec_cosine_ops) WITH (m = 16, ef_construction = 32)
    WHERE embedder = 'builtin-use-lite-v1' AND embedding IS NOT NULL$q$;
END $do$;
