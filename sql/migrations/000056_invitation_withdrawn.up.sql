-- When an invitation was withdrawn from the People page: withdrawing ended its link by
-- moving expires_at to the moment, so the list showed a withdrawn link as expired. Set
-- together with expires_at; a link withdrawn before this migration stays "expired".
--
-- One statement (docs/scale.md: a Citus coordinator whose tables are distributed refuses
-- a file of several).
ALTER TABLE org_invitation ADD COLUMN withdrawn_at timestamptz;
