ALTER FUNCTION rr_near_duplicate(text, text, real, real) RESET cpu_operator_cost;
