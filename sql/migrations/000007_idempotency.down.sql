DROP TABLE IF EXISTS idempotency_key;
