-- The sweep looks for wakes left "sending" by a delivery that ended without settling them
-- (wake.Service.rescueSending): this index finds them among the week of delivered and
-- canceled wakes kept for people to see, so the 30 s sweep never reads the whole table.
CREATE INDEX wake_sending_idx ON wake (updated_at) WHERE status = 'sending';
