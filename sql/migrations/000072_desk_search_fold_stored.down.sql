-- The accents folded by the up migration are not put back (the words they came from are
-- in the messages, not in the search text): 000071's down says what that means.
SELECT 1;
