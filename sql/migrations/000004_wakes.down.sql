DROP TABLE IF EXISTS wake_target;
DROP TABLE IF EXISTS wake;
DROP INDEX IF EXISTS membership_parked_idx;
DROP FUNCTION IF EXISTS rr_wake_budget(jsonb);
