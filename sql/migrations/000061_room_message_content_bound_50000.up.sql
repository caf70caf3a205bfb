-- Room messages hold up to 50,000 characters (see 000060). NOT VALID: the bound only
-- widened, every stored row meets it, so the table is not read under the ALTER's lock.
ALTER TABLE room_message ADD CONSTRAINT room_message_content_check CHECK (length(content) BETWEEN 1 AND 50000) NOT VALID;
