DROP TABLE org_invitation;
DROP TABLE audit_event;
