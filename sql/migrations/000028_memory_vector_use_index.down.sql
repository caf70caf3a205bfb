DROP INDEX IF EXISTS memory_vector_use_hnsw;
