-- The dashboard's company admin (internal/admin/org.go): an organisation's owners and
-- admins manage what it owns. Run as the operator, so every statement names the
-- organisation it acts for and nothing of another is read or changed.

-- name: OrganisationGetByID :one
SELECT id, slug, name, plan, timezone FROM organisation WHERE id = sqlc.arg(id);

-- name: AgentListInOrg :many
-- The key counts are a grouped subquery, as in AgentList.
SELECT a.id, a.slug, a.name, a.model, a.kind, coalesce(k.n, 0)::bigint AS active_keys,
  coalesce(w.url, '')::text AS webhook_url
FROM agent a
LEFT JOIN (SELECT ak.agent_id, count(*) AS n FROM agent_key ak
           WHERE ak.org_id = sqlc.arg(org_id) AND ak.revoked_at IS NULL GROUP BY ak.agent_id) k ON k.agent_id = a.id
LEFT JOIN wake_target w ON w.org_id = a.org_id AND w.agent_id = a.id
WHERE a.org_id = sqlc.arg(org_id)
ORDER BY a.name, a.slug;

-- name: AgentGetInOrg :one
SELECT a.id, a.slug, a.name, a.model, a.kind FROM agent a
WHERE a.org_id = sqlc.arg(org_id) AND a.id = sqlc.arg(id);

-- name: ProjectListHostedBy :many
SELECT p.id, p.slug, p.name FROM project p WHERE p.host_org_id = sqlc.arg(org_id) ORDER BY p.name, p.slug;

-- name: ProjectGetHostedBy :one
SELECT p.id, p.slug, p.name FROM project p
WHERE p.host_org_id = sqlc.arg(org_id) AND p.id = sqlc.arg(id);

-- name: MembershipListForAdmin :many
SELECT m.part, m.is_main, m.access, m.capabilities, m.last_seen_at, a.id AS agent_id, a.name AS agent_name,
  o.name AS org_name
FROM membership m
JOIN agent a ON a.id = m.agent_id
JOIN organisation o ON o.id = m.org_id
WHERE m.project_id = sqlc.arg(project_id)
ORDER BY m.part;

-- name: MembershipSetAccess :execrows
UPDATE membership SET access = sqlc.arg(access), capabilities = sqlc.arg(capabilities), updated_at = now()
WHERE project_id = sqlc.arg(project_id) AND part = sqlc.arg(part);

-- name: AgreementListForOrg :many
-- The agreements of an organisation's rooms (as host) and of the rooms it is invited to
-- (as guest).
SELECT a.project_id, p.name AS project_name, p.host_org_id, h.name AS host_name,
  a.guest_org_id, g.name AS guest_name, g.slug AS guest_slug, a.status, a.grants, a.updated_at
FROM agreement a
JOIN project p ON p.id = a.project_id
JOIN organisation h ON h.id = p.host_org_id
JOIN organisation g ON g.id = a.guest_org_id
WHERE p.host_org_id = sqlc.arg(org_id) OR a.guest_org_id = sqlc.arg(org_id)
ORDER BY p.name, g.name;

-- name: AgreementSetGrants :execrows
UPDATE agreement SET grants = sqlc.arg(grants), updated_at = now()
WHERE project_id = sqlc.arg(project_id) AND guest_org_id = sqlc.arg(guest_org_id);

-- name: OrgMemberListByOrg :many
SELECT u.id, u.email, u.name, om.role, om.deactivated_at
FROM org_member om JOIN app_user u ON u.id = om.user_id
WHERE om.org_id = sqlc.arg(org_id)
ORDER BY u.name, u.email;

-- name: OrgMemberSetRole :execrows
UPDATE org_member SET role = sqlc.arg(role) WHERE org_id = sqlc.arg(org_id) AND user_id = sqlc.arg(user_id);

-- name: OrgOwnersLock :exec
-- Makes role changes of one organisation take turns from reading its owners to commit,
-- so that two owners demoting each other at once cannot both count two owners and leave
-- none. A transaction-scoped advisory lock (class 7277) on the organisation: only its own
-- role changes wait (and its agent creations and member additions, which check for a
-- duplicate before they write). On Citus it is taken on the coordinator, which every replica shares.
SELECT pg_advisory_xact_lock(7277, hashtext(sqlc.arg(org_id)::uuid::text));

-- name: OrgMemberCountOwners :one
-- The owners who can act: a deactivated owner acts for the organisation in nothing, so an
-- organisation whose other owners are deactivated has one owner left.
SELECT count(*) FROM org_member WHERE org_id = sqlc.arg(org_id) AND role = 'owner' AND deactivated_at IS NULL;

-- name: OAuthClientListByOrg :many
-- The clients an organisation's people connected (live grants), with how many consents.
SELECT c.client_id, c.client_name, count(*)::bigint AS grants, max(g.created_at)::timestamptz AS last_consent
FROM oauth_grant g JOIN oauth_client c ON c.client_id = g.client_id
WHERE g.org_id = sqlc.arg(org_id) AND g.revoked_at IS NULL
GROUP BY c.client_id, c.client_name
ORDER BY max(g.created_at) DESC, c.client_id;

-- name: OAuthGrantRevokeByOrgClient :many
-- Disconnects a client from one organisation: its consents there end (its tokens with
-- them, OAuthTokenRevokeByGrantID); its consents in other organisations stay.
UPDATE oauth_grant SET revoked_at = now()
WHERE org_id = sqlc.arg(org_id) AND client_id = sqlc.arg(client_id) AND revoked_at IS NULL
RETURNING id;

-- name: InvitationInsert :exec
INSERT INTO org_invitation (org_id, id, invite_id, secret_hash, email, role, invited_by_user_id, expires_at)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(invite_id), sqlc.arg(secret_hash), sqlc.arg(email), sqlc.arg(role),
  sqlc.narg(invited_by_user_id), sqlc.arg(expires_at));

-- name: InvitationListByOrg :many
-- Newest first, with who sent each (their name, else their email; empty when unknown)
-- and whether it was withdrawn.
SELECT i.id, i.email, i.role, i.created_at, i.expires_at, i.accepted_at, i.withdrawn_at,
  coalesce(nullif(u.name, ''), u.email, '')::text AS invited_by
FROM org_invitation i LEFT JOIN app_user u ON u.id = i.invited_by_user_id
WHERE i.org_id = sqlc.arg(org_id)
ORDER BY i.created_at DESC
LIMIT 100;

-- name: InvitationWithdraw :one
-- An owner or admin withdraws an open invitation of their organisation: its link stops
-- working at once. Returns its role (an owner's link is an owner's to withdraw).
UPDATE org_invitation SET expires_at = now(), withdrawn_at = now()
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id) AND accepted_at IS NULL AND expires_at > now()
RETURNING email, role;

-- name: InvitationRowsByInviteID :many
-- The invitations a link's public id names, with their organisation; hashes compared in Go.
-- inviter_may_grant: whoever sent the link may still give its role (an active owner, or an
-- active admin for an admin's or member's link); a link outlives no demotion or
-- deactivation of its sender. A link without a sender (none is made so today) stands.
SELECT i.org_id, i.id, i.secret_hash, i.email, i.role, i.expires_at, i.accepted_at, o.name AS org_name,
  (i.invited_by_user_id IS NULL OR EXISTS (
    SELECT 1 FROM org_member m
    WHERE m.org_id = i.org_id AND m.user_id = i.invited_by_user_id AND m.deactivated_at IS NULL
      AND (m.role = 'owner' OR (m.role = 'admin' AND i.role <> 'owner'))))::boolean AS inviter_may_grant
FROM org_invitation i JOIN organisation o ON o.id = i.org_id
WHERE i.invite_id = sqlc.arg(invite_id);

-- name: InvitationAccept :execrows
-- A withdrawal, a retirement by another of the email's links or the expiry that committed
-- while the acceptance ran is seen here: withdrawn_at, and the statement's start rather
-- than the transaction's (a withdrawal's expires_at is its own later now()). Not
-- clock_timestamp(): Citus refuses a volatile function in the WHERE of an update of a
-- distributed table.
UPDATE org_invitation SET accepted_at = now(), accepted_user_id = sqlc.arg(user_id)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id) AND accepted_at IS NULL AND withdrawn_at IS NULL
  AND expires_at > statement_timestamp();

-- name: InvitationRetireOthers :exec
-- An accepted invitation ends the email's other pending ones of the organisation (a link
-- sent again, an older one with another role): left open, a spare link would set the role
-- again after an owner had changed it.
UPDATE org_invitation SET expires_at = now()
WHERE org_id = sqlc.arg(org_id) AND email = sqlc.arg(email) AND id <> sqlc.arg(id)
  AND accepted_at IS NULL AND expires_at > now();

-- name: UserGetByEmail :one
SELECT id, name FROM app_user WHERE email = sqlc.arg(email);

-- name: OrgMemberExists :one
SELECT EXISTS (SELECT 1 FROM org_member om JOIN app_user u ON u.id = om.user_id
  WHERE om.org_id = sqlc.arg(org_id) AND u.email = sqlc.arg(email))::boolean;
