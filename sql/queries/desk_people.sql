-- The desk's pages for people (internal/desk/people.go, docs/dashboard.md "Desk"). Every
-- statement names its workspace (org_id) and runs in that workspace's tenant. No statement
-- here reads an inbox's connection secret or forwarding address: the pages never show them.

-- name: DeskInboxListForPeople :many
-- The inboxes the person sees (the visibility of DeskInboxList), by name then id, each with
-- its open conversations and the names of the members it is restricted to.
SELECT i.id, i.slug, i.name, i.restricted,
  (SELECT count(*) FROM desk_conversation c
   WHERE c.org_id = sqlc.arg(org_id) AND c.inbox_id = i.id AND c.status = 'open')::bigint AS open_count,
  coalesce((SELECT array_agg(u.name ORDER BY u.name) FROM desk_inbox_member im JOIN app_user u ON u.id = im.user_id
            WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id), '{}')::text[] AS member_names
FROM desk_inbox i
WHERE i.org_id = sqlc.arg(org_id)
  AND (sqlc.arg(sees_all)::bool OR NOT i.restricted OR EXISTS (
        SELECT 1 FROM desk_inbox_member im
        WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = i.id AND im.user_id = sqlc.arg(user_id)))
  AND (sqlc.narg(only_id)::bigint IS NULL OR i.id = sqlc.narg(only_id)::bigint)
ORDER BY i.name COLLATE "und-x-icu", i.id
LIMIT sqlc.arg(lim);

-- name: DeskInboxAccessList :many
-- The workspace's members, each with whether the inbox is restricted to include them. A
-- deactivated member is offered only while the inbox lists them (so they can be taken
-- off): they see nothing while deactivated, and choosing them would list someone who
-- cannot act.
SELECT m.user_id, u.name, u.email, m.role, (m.deactivated_at IS NOT NULL)::boolean AS deactivated,
  EXISTS (SELECT 1 FROM desk_inbox_member im
          WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = sqlc.arg(inbox_id) AND im.user_id = m.user_id)::bool AS listed
FROM org_member m JOIN app_user u ON u.id = m.user_id
WHERE m.org_id = sqlc.arg(org_id)
  AND (m.deactivated_at IS NULL OR EXISTS (SELECT 1 FROM desk_inbox_member im
          WHERE im.org_id = sqlc.arg(org_id) AND im.inbox_id = sqlc.arg(inbox_id) AND im.user_id = m.user_id))
ORDER BY u.name, m.user_id;

-- name: DeskInboxSetRestricted :execrows
UPDATE desk_inbox SET restricted = sqlc.arg(restricted)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);

-- name: DeskSavedReplyListForPeople :many
SELECT id, title, body FROM desk_saved_reply
WHERE org_id = sqlc.arg(org_id)
ORDER BY title COLLATE "und-x-icu", id
LIMIT sqlc.arg(lim);

-- name: DeskSavedReplyGetForPeople :one
SELECT id, title, body FROM desk_saved_reply WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);

-- name: DeskSavedReplyInsert :exec
INSERT INTO desk_saved_reply (org_id, id, slug, title, body)
VALUES (sqlc.arg(org_id), sqlc.arg(id), sqlc.arg(slug), sqlc.arg(title), sqlc.arg(body));

-- name: DeskSavedReplyUpdate :execrows
UPDATE desk_saved_reply SET title = sqlc.arg(title), body = sqlc.arg(body)
WHERE org_id = sqlc.arg(org_id) AND id = sqlc.arg(id);
