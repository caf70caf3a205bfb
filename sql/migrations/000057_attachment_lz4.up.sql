-- A download reads its attachment 1 MiB at a time (rooms.DownloadChunk), and a slice of a
-- compressed value is decompressed from the start: the last MiB of a 25 MB file that pglz
-- compressed took 80 ms, lz4 20 ms, so a whole download of a highly compressible file
-- costs about four times less with lz4. New attachments are stored with lz4; those stored
-- before keep pglz (a value is recompressed only when it is written).
--
-- One statement (docs/scale.md: a Citus coordinator whose tables are distributed refuses
-- a file of several); Citus propagates SET COMPRESSION to the shards, not SET STORAGE,
-- which would have stored attachments uncompressed.
ALTER TABLE task_attachment ALTER COLUMN content SET COMPRESSION lz4;
