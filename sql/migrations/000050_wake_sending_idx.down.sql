DROP INDEX wake_sending_idx;
