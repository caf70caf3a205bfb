DROP TABLE audit_event;
