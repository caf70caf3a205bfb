-- unaccent folds accented letters to their plain form (é to e, ß to ss, œ to oe): the desk's
-- search text and queries go through it from 000070 on, so that "cafe" finds "café". It
-- is a contrib module of every PostgreSQL distribution and a trusted extension (the
-- migrating role needs CREATE on the database, not superuser), as pg_trgm is.
CREATE EXTENSION IF NOT EXISTS unaccent;
