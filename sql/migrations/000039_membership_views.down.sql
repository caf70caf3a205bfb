-- The presence queries and the binds of before 000039 name the rule and the joins themselves.
DROP VIEW membership_scope;
DROP VIEW membership_presence_due;
