-- write_memory answers the entry already stored when the same write comes again (a client
-- retrying without an Idempotency-Key): it looks the content up by equality. A hash index:
-- content runs to 20,000 characters, past what a btree entry holds, and text equality is
-- leakproof, so the index serves the request role under row-level security
-- (docs/rooms.md, "The same write again").
CREATE INDEX memory_entry_content_hash_idx ON memory_entry USING hash (content);
