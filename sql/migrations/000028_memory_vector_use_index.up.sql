-- HNSW (cosine) for the default builtin embedder, the Universal Sentence Encoder Lite
-- (builtin-use-lite-v1, 512 dimensions; docs/embeddings.md). Like the GloVe index of
-- 000005 it is an expression index restricted to that embedder, because an index needs
-- a fixed dimension and memory_vector holds vectors of every embedder. The GloVe index
-- stays: RELAYROOM_EMBEDDER=glove still selects that embedder.
CREATE INDEX memory_vector_use_hnsw ON memory_vector
  USING hnsw ((embedding::vector(512)) vector_cosine_ops)
  WHERE embedder = 'builtin-use-lite-v1' AND embedding IS NOT NULL;
