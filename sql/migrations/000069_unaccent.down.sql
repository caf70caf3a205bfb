-- The extension stays, as 000001's do: other schemas in the database may use it.
SELECT 1;
