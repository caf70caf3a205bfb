-- Policies and the index go with the table.
DROP TABLE IF EXISTS auth_verified;
