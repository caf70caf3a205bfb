-- The embedding backlog lists entries without a vector oldest first, from where its last
-- pass left off (rooms.Service.listUnembedded): this index lets it start there instead of
-- reading every entry of every room on every tick, when nearly all have their vector.
CREATE INDEX memory_entry_created_idx ON memory_entry (created_at);
