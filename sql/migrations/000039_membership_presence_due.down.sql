-- The presence queries of before 000039 name the rule themselves.
DROP VIEW membership_presence_due;
