-- The words deleted are not put back: they were the words of entries nobody confirmed.
SELECT 1;
