-- The fractions are gone: nothing to undo (the times stay valid at either precision).
SELECT 1;
