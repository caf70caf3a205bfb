ALTER TABLE task_attachment ALTER COLUMN content SET COMPRESSION pglz;
