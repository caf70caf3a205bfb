-- The 20,000-character bound again, for new rows; cards already longer stay (NOT VALID).
ALTER TABLE room_message ADD CONSTRAINT room_message_content_check CHECK (length(content) BETWEEN 1 AND 20000) NOT VALID;
