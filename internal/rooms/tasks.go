package rooms

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/wake"
)

// Priorities of a task (send_task's priority).
const (
	PriorityLow    = "low"
	PriorityNormal = "normal" // when send_task names none
	PriorityHigh   = "high"
	PriorityUrgent = "urgent"
)

// Outcomes of a task its recipient can respond with (respond_to_task's status).
const (
	StatusDone          = "done"
	StatusFailed        = "failed"
	StatusRejected      = "rejected"
	StatusInputRequired = "input_required"
)

// Task statuses and the protocol's state names beside them (docs/rooms.md).
var stateOf = map[string]string{
	"pending":        "SUBMITTED",
	"in_progress":    "WORKING",
	"input_required": "INPUT_REQUIRED",
	"done":           "COMPLETED",
	"failed":         "FAILED",
	"rejected":       "REJECTED",
	"canceled":       "CANCELED",
}

// SendTaskInput is send_task's arguments.
type SendTaskInput struct {
	ToAgentSlug        string   `json:"to_agent_slug"`
	Goal               string   `json:"goal"`
	Priority           string   `json:"priority,omitempty"`
	Deadline           string   `json:"deadline,omitempty"`
	MemoryRefs         []string `json:"memory_refs,omitempty"`
	AcceptanceCriteria string   `json:"acceptance_criteria,omitempty"`
	VerificationMethod string   `json:"verification_method,omitempty"`
}

// SendTaskResult is send_task's answer.
type SendTaskResult struct {
	Success    bool   `json:"success"`
	TaskID     string `json:"task_id"`
	AssignedTo string `json:"assigned_to"`
	Goal       string `json:"goal"`
	Status     string `json:"status"`
	State      string `json:"state"`
	Message    string `json:"message"`
	// Redacted is as in PostResult.
	Redacted []string `json:"redacted,omitempty"`
}

// parseDeadline accepts an RFC 3339 date-time or a bare date (midnight UTC).
func parseDeadline(s string) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	// ISO 8601 writes T and Z in either case, and the offset with or without its colon.
	v := strings.ToUpper(s)
	for _, layout := range deadlineLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			if y := t.UTC().Year(); y < minDeadlineYear || y > maxDeadlineYear {
				return nil, invalid("deadline must be between the years %d and %d (got %q)", minDeadlineYear, maxDeadlineYear, s)
			}
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, invalid("deadline must be an ISO 8601 date or date-time, e.g. 2026-09-15 or 2026-09-15T17:00:00Z (got %q)", s)
}

// deadlineLayouts are the forms of a deadline: a date-time with an offset (Z, +02:00 or
// +0200; seconds and their fractions optional), one without (UTC), a date (midnight UTC).
var deadlineLayouts = []string{
	time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04Z0700",
	"2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02",
}

// The years a deadline may fall in: "0000-01-01" parses, and means nothing.
const (
	minDeadlineYear = 1970
	maxDeadlineYear = 9999
)

func parseIDs(field string, in []string) ([]uuid.UUID, error) {
	out := make([]uuid.UUID, 0, len(in))
	for _, s := range in {
		id, err := uuid.Parse(strings.TrimSpace(s))
		if err != nil {
			return nil, apperr.New(apperr.NotFound, "Memory entry not found: %s", s)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// urgentWake reports whether a task of this priority wakes its recipient as urgent,
// past the recipient's wake budget: only when the sender's part holds the urgent
// capability, as for an urgent threads message. Without it an urgent task is stored
// with its priority and wakes within the budget, so no member, a guest company's
// included, can wake another company's always-on agent as often as it likes.
func urgentWake(sc tenancy.Scope, priority string) bool {
	return priority == PriorityUrgent && sc.HasCapability(tenancy.CapUrgent)
}

// SendTask assigns work to a member of the room named by its part (to_agent_slug). Across
// companies the guest side's agreement must be active and grant assign_tasks.
func (s *Service) SendTask(ctx context.Context, sc tenancy.Scope, in SendTaskInput) (SendTaskResult, error) {
	if err := requireAgreement(sc); err != nil {
		return SendTaskResult{}, err
	}
	goal := strings.TrimSpace(in.Goal)
	if goal == "" {
		return SendTaskResult{}, invalid("goal must not be blank")
	}
	// The goal, criteria and method are stored, shown in the inbox and (the goal) in the
	// room's card and the answer: each is masked, never refused.
	var redacted []string
	goal, err := s.mask(goal, maxGoalRunes, &redacted)
	if err != nil {
		return SendTaskResult{}, err
	}
	if in.AcceptanceCriteria, err = s.mask(in.AcceptanceCriteria, 0, &redacted); err != nil {
		return SendTaskResult{}, err
	}
	if in.VerificationMethod, err = s.mask(in.VerificationMethod, 0, &redacted); err != nil {
		return SendTaskResult{}, err
	}
	deadline, err := parseDeadline(in.Deadline)
	if err != nil {
		return SendTaskResult{}, err
	}
	refs, err := parseIDs("memory_refs", in.MemoryRefs)
	if err != nil {
		return SendTaskResult{}, err
	}
	priority := in.Priority
	if priority == "" {
		priority = PriorityNormal
	}
	slug := strings.TrimSpace(in.ToAgentSlug)
	var (
		res SendTaskResult
		to  db.RoomMemberGetByPartRow
	)
	id, at := newID(), s.now()
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		to, err = s.Q.RoomMemberGetByPart(ctx, tx, db.RoomMemberGetByPartParams{ProjectID: sc.ProjectID, Part: slug})
		if pg.IsNoRows(err) {
			// The caller's own company's agent may be a member under another part name; its
			// slug names it too (a guest's agent is named by its part: slugs repeat across
			// companies).
			var own db.RoomMemberGetByAgentSlugRow
			own, err = s.Q.RoomMemberGetByAgentSlug(ctx, tx, db.RoomMemberGetByAgentSlugParams{ProjectID: sc.ProjectID, OrgID: sc.OrgID, Slug: slug})
			to = db.RoomMemberGetByPartRow(own)
		}
		// No rooms tool lists part names (messages show display names): name them, so
		// that the caller can correct the call instead of guessing.
		notFound := func() error {
			parts, err := s.Q.RoomMemberListAdmittedParts(ctx, tx, sc.ProjectID)
			if err != nil {
				return err
			}
			return apperr.New(apperr.NotFound, "Agent %q not found in this project. Its parts: %s", slug, partList(parts))
		}
		if pg.IsNoRows(err) {
			exists, err := s.Q.AgentExistsInOrg(ctx, tx, db.AgentExistsInOrgParams{OrgID: sc.OrgID, Slug: slug})
			if err != nil {
				return err
			}
			if exists {
				return apperr.New(apperr.NotFound, "Agent %q exists but is not a member of this project", slug)
			}
			return notFound()
		}
		if err != nil {
			return err
		}
		if to.OrgID != sc.OrgID {
			if err := s.crossCompany(ctx, tx, sc, to); errors.Is(err, errNotAdmitted) {
				return notFound()
			} else if err != nil {
				return err
			}
		}
		if len(refs) > 0 {
			found, err := s.Q.MemoryEntryVisibleIDs(ctx, tx, db.MemoryEntryVisibleIDsParams{ProjectID: sc.ProjectID, Ids: refs, OrgID: sc.OrgID, ReaderOrgID: to.OrgID})
			if err != nil {
				return err
			}
			for _, r := range refs {
				if !slices.Contains(found, r) {
					return apperr.New(apperr.NotFound, "Memory entry not found: %s", r)
				}
			}
		}
		// The task, its card and its wake go to the server in one round trip: the inserts
		// return nothing anyone reads (see pg.Tx.Pipeline).
		assigned := fmt.Sprintf("%s (%s)", to.AgentName, to.OrgName)
		if err := tx.Pipeline(func() error {
			if err := s.Q.TaskInsert(ctx, tx, db.TaskInsertParams{
				ProjectID: sc.ProjectID, ID: id, FromAgentID: &sc.AgentID, FromOrgID: sc.OrgID,
				ToMemberID: to.ID, ToAgentID: to.AgentID, ToOrgID: to.OrgID, Goal: goal, Priority: priority,
				Deadline: deadline, MemoryRefs: refs, AcceptanceCriteria: optText(in.AcceptanceCriteria),
				VerificationMethod: optText(in.VerificationMethod), CreatedAt: at,
			}); err != nil {
				return err
			}
			card := fmt.Sprintf("[task] Assigned to %s (priority %s): %s", assigned, priority, excerpt(goal, 280))
			if err := s.card(ctx, tx, sc, "task", card, id, at); err != nil {
				return err
			}
			// Only an always-on recipient is woken; its kind came with the lookup above, so
			// the wake reads nothing more (AlwaysOnOnly would: one more round trip).
			if to.AgentID != sc.AgentID && to.AgentKind == agentAlwaysOn {
				if err := s.queueWake(ctx, tx, wake.Request{ProjectID: sc.ProjectID, HostOrgID: sc.HostOrgID, MemberIDs: []uuid.UUID{to.ID}, Source: "task",
					ItemID: id, Urgent: urgentWake(sc, priority)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		res = SendTaskResult{Success: true, TaskID: id.String(), AssignedTo: assigned, Goal: goal, Status: "pending",
			State: stateOf["pending"], Message: fmt.Sprintf("Task queued in %s's inbox. An always-on agent is woken to work on it; "+
				"an agent connected from a chat or coding tool sees it the next time its inbox is checked.", to.AgentName),
			Redacted: redacted}
		return nil
	})
	if err != nil {
		return SendTaskResult{}, pg.Classify("send task", err)
	}
	return res, nil
}

// errNotAdmitted is crossCompany's answer to a guest naming an agent of another guest
// company whose agreement is not active: send_task answers it as an unknown agent.
var errNotAdmitted = errors.New("rooms: the recipient's company is not admitted to the room")

// crossCompany checks a task between two companies: each guest side needs an active
// agreement granting assign_tasks (the host side needs none). A guest company whose
// agreement is pending or revoked is not in the room for the other guests, as its parts
// are not in the unknown agent's list: naming one of them is errNotAdmitted, before the
// caller's own grant is checked, so that no answer tells that company is there. The host
// made that agreement, and is told about it.
func (s *Service) crossCompany(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, to db.RoomMemberGetByPartRow) error {
	admitted := to.OrgID == sc.HostOrgID
	var grants []string
	if !admitted {
		ag, err := s.Q.AgreementGetForRoom(ctx, tx, db.AgreementGetForRoomParams{ProjectID: sc.ProjectID, GuestOrgID: to.OrgID})
		if err != nil && !pg.IsNoRows(err) {
			return err
		}
		admitted, grants = err == nil && ag.Status == tenancy.AgreementActive, ag.Grants
		if !admitted && !sc.IsHost() {
			return errNotAdmitted
		}
	}
	if !sc.IsHost() && !sc.Granted(tenancy.GrantAssignTasks) {
		return apperr.New(apperr.Forbidden, MsgNoAssignTasks)
	}
	if to.OrgID == sc.HostOrgID {
		return nil
	}
	if !admitted || !slices.Contains(grants, tenancy.GrantAssignTasks) {
		return apperr.New(apperr.Forbidden, "No active agreement between your organisation and %s grants task assignment", to.OrgName)
	}
	return nil
}

func optText(s string) *string {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return &s
}

// InboxTask is one task of get_inbox.
type InboxTask struct {
	TaskID             string       `json:"task_id"`
	From               string       `json:"from"`
	Goal               string       `json:"goal"`
	Priority           string       `json:"priority"`
	Status             string       `json:"status"`
	State              string       `json:"state"`
	Deadline           string       `json:"deadline"`
	MemoryRefs         []string     `json:"memory_refs"`
	CreatedAt          string       `json:"created_at"`
	AcceptanceCriteria *string      `json:"acceptance_criteria,omitempty"`
	VerificationMethod *string      `json:"verification_method,omitempty"`
	Attachments        []Attachment `json:"attachments,omitempty"`
}

// InboxResult is get_inbox's answer.
type InboxResult struct {
	PendingTasks *int        `json:"pending_tasks,omitempty"`
	Message      string      `json:"message,omitempty"`
	Tasks        []InboxTask `json:"tasks"`
	// Truncated is true when MaxInboxBytes cut the answer short of limit: the tasks left
	// out are not handed out, and the next call lists them. Left out of a whole answer,
	// which keeps the contract's shape.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxInboxBytes bounds the task text one get_inbox answer holds (goal, acceptance
// criteria and verification method as JSON writes them; never fewer than one task):
// 100 tasks of 5,000 control characters in each, six bytes each once written, made a
// 10.5 MB answer, stored again as its idempotent replay. Attachments have their own
// budget (InlineBudget).
const MaxInboxBytes = 1 << 20

// inboxTaskSize is what a task's text costs of MaxInboxBytes.
func inboxTaskSize(r db.TaskListOpenRow) int {
	n := text.JSONSize(r.Goal)
	for _, p := range []*string{r.AcceptanceCriteria, r.VerificationMethod} {
		if p != nil {
			n += text.JSONSize(*p)
		}
	}
	return n
}

// Inbox lists the caller's open tasks, pending ones first, and moves the listed pending
// ones to in_progress in the same transaction. The UPDATE takes row locks and re-checks
// the status, so of two concurrent calls only one hands a task out as pending; the other
// reports what the task has become (in progress, or answered meanwhile).
func (s *Service) Inbox(ctx context.Context, sc tenancy.Scope, limit int) (InboxResult, error) {
	if err := requireAgreement(sc); err != nil {
		return InboxResult{}, err
	}
	if limit <= 0 {
		limit = 50
	}
	var (
		out     InboxResult
		pending int
	)
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		rows, err := s.Q.TaskListOpen(ctx, tx, db.TaskListOpenParams{ProjectID: sc.ProjectID, ToAgentID: sc.AgentID})
		if err != nil {
			return err
		}
		rows = rows[:min(limit, len(rows))]
		// Cut before the hand-out below, so a task left out stays pending.
		size := 0
		for i, r := range rows {
			if size += inboxTaskSize(r); i > 0 && size > MaxInboxBytes {
				rows, out.Truncated = rows[:i], true
				break
			}
		}
		var pendingIDs []uuid.UUID
		for _, r := range rows {
			if r.Status == "pending" {
				pendingIDs = append(pendingIDs, r.ID)
			}
		}
		var moved []uuid.UUID
		if len(pendingIDs) > 0 {
			if moved, err = s.Q.TaskStartPending(ctx, tx, db.TaskStartPendingParams{ProjectID: sc.ProjectID, Ids: pendingIDs}); err != nil {
				return err
			}
		}
		// A listed pending task that did not move changed between the list and its lock:
		// another call handed it out, or it was answered or canceled. Report what it is now.
		now := map[uuid.UUID]string{}
		if missed := slices.DeleteFunc(slices.Clone(pendingIDs), func(id uuid.UUID) bool { return slices.Contains(moved, id) }); len(missed) > 0 {
			cur, err := s.Q.TaskStatuses(ctx, tx, db.TaskStatusesParams{ProjectID: sc.ProjectID, Ids: missed})
			if err != nil {
				return err
			}
			for _, c := range cur {
				now[c.ID] = c.Status
			}
		}
		out.Tasks = make([]InboxTask, 0, len(rows))
		ids := make([]uuid.UUID, 0, len(rows))
		for _, r := range rows {
			status := r.Status
			if slices.Contains(moved, r.ID) {
				pending++ // reported as found (pending): this call handed it out
			} else if c, ok := now[r.ID]; ok {
				status = c
			}
			t := InboxTask{TaskID: r.ID.String(), From: nameOrg(r.FromName, r.FromOrg), Goal: r.Goal, Priority: r.Priority,
				Status: status, State: stateOf[status], Deadline: MsgNoDeadline, MemoryRefs: make([]string, 0, len(r.MemoryRefs)),
				CreatedAt: ts(r.CreatedAt), AcceptanceCriteria: r.AcceptanceCriteria, VerificationMethod: r.VerificationMethod}
			if r.Deadline != nil {
				t.Deadline = ts(*r.Deadline)
			}
			for _, m := range r.MemoryRefs {
				t.MemoryRefs = append(t.MemoryRefs, m.String())
			}
			out.Tasks = append(out.Tasks, t)
			ids = append(ids, r.ID)
		}
		if len(ids) > 0 {
			return s.attachInline(ctx, tx, sc, ids, out.Tasks)
		}
		return nil
	})
	if err != nil {
		return InboxResult{}, pg.Classify("get inbox", err)
	}
	if len(out.Tasks) == 0 {
		return InboxResult{Message: MsgEmptyInbox, Tasks: []InboxTask{}}, nil
	}
	out.PendingTasks = &pending
	return out, nil
}

// RespondInput is respond_to_task's arguments.
type RespondInput struct {
	TaskID string `json:"task_id"`
	Result string `json:"result"`
	Status string `json:"status"`
}

// RespondResult is respond_to_task's answer.
type RespondResult struct {
	Success        bool   `json:"success"`
	TaskID         string `json:"task_id"`
	Status         string `json:"status"`
	State          string `json:"state"`
	ResultRecorded bool   `json:"result_recorded"`
	Message        string `json:"message"`
	// Redacted is as in PostResult.
	Redacted []string `json:"redacted,omitempty"`
}

var openStatuses = []string{"pending", "in_progress", "input_required"}

func taskNotFound(id string) error { return apperr.New(apperr.NotFound, "Task not found: %s", id) }

// lockTask reads task id for a change (its row locked until the transaction ends). A
// task the caller's company is not party to, as neither sender nor recipient, answers
// "Task not found" exactly like an id that does not exist, so its existence does not
// leak. The host is party to every task of its room when hostSeesAll: its people see
// them all on the dashboard, and the contract lets the host attach files to any.
func (s *Service) lockTask(ctx context.Context, tx *pg.Tx, sc tenancy.Scope, id uuid.UUID, taskID string, hostSeesAll bool) (db.TaskGetForUpdateRow, error) {
	t, err := s.Q.TaskGetForUpdate(ctx, tx, db.TaskGetForUpdateParams{ProjectID: sc.ProjectID, ID: id})
	if pg.IsNoRows(err) {
		return t, taskNotFound(taskID)
	}
	if err != nil {
		return t, err
	}
	if t.FromOrgID != sc.OrgID && t.ToOrgID != sc.OrgID && !(hostSeesAll && sc.IsHost()) {
		return t, taskNotFound(taskID)
	}
	return t, nil
}

// RespondToTask records the recipient's result and outcome; the room sees a card and the
// sender is woken.
func (s *Service) RespondToTask(ctx context.Context, sc tenancy.Scope, in RespondInput) (RespondResult, error) {
	if err := requireAgreement(sc); err != nil {
		return RespondResult{}, err
	}
	id, err := uuid.Parse(strings.TrimSpace(in.TaskID))
	if err != nil {
		return RespondResult{}, taskNotFound(in.TaskID)
	}
	if strings.TrimSpace(in.Result) == "" {
		return RespondResult{}, invalid("result must not be blank")
	}
	var redacted []string
	if in.Result, err = s.mask(in.Result, 0, &redacted); err != nil {
		return RespondResult{}, err
	}
	at := s.now()
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		t, err := s.lockTask(ctx, tx, sc, id, in.TaskID, false)
		if err != nil {
			return err
		}
		if t.ToAgentID != sc.AgentID {
			return apperr.New(apperr.Forbidden, "Task %s is assigned to a different agent: only its recipient can respond to it", id)
		}
		if !slices.Contains(openStatuses, t.Status) {
			return apperr.New(apperr.Conflict, "Task %s is already %s and cannot change", id, t.Status)
		}
		// The response and its card return nothing anyone reads: they travel with the
		// sender's lookup below, or with the COMMIT (pg.Tx.Pipeline); the task row is
		// already locked, so nothing decided above can change before they run.
		err = tx.Pipeline(func() error {
			if err := s.Q.TaskRespond(ctx, tx, db.TaskRespondParams{ProjectID: sc.ProjectID, ID: id, Status: in.Status, Result: &in.Result}); err != nil {
				return err
			}
			// The whole result: the contract lets the sender and everyone in the room see the
			// response, and the room's conversation is where they see it. A room message
			// holds a result at its limit with room to spare; the cut is only for a result
			// that masking more than doubled.
			prefix := fmt.Sprintf("[task] Responded to %q: %s. ", excerpt(t.Goal, 80), in.Status)
			card := prefix + excerpt(in.Result, maxMessageRunes-utf8.RuneCountInString(prefix)-1)
			return s.card(ctx, tx, sc, "task", card, id, at)
		})
		if err != nil {
			return err
		}
		if t.FromAgentID != nil && *t.FromAgentID != sc.AgentID {
			// Only an always-on sender is woken; the lookup says whether it is one.
			m, err := s.Q.RoomMemberGetSender(ctx, tx, db.RoomMemberGetSenderParams{ProjectID: sc.ProjectID, AgentID: *t.FromAgentID})
			if err == nil && !m.AlwaysOn {
				return nil
			}
			if err == nil {
				// The wake's insert travels with the COMMIT.
				return tx.Pipeline(func() error {
					return s.queueWake(ctx, tx, wake.Request{ProjectID: sc.ProjectID, HostOrgID: sc.HostOrgID, MemberIDs: []uuid.UUID{m.ID}, Source: "task", ItemID: id})
				})
			}
			if !pg.IsNoRows(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return RespondResult{}, pg.Classify("respond to task", err)
	}
	return RespondResult{Success: true, TaskID: id.String(), Status: in.Status, State: stateOf[in.Status], ResultRecorded: true,
		Message: fmt.Sprintf("Task marked as %s. The sender has been notified.", strings.ReplaceAll(in.Status, "_", " ")), Redacted: redacted}, nil
}

// ReviewResult is the HTTP answer of accepting or rejecting a result.
type ReviewResult struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
	State  string `json:"state"`
	Review string `json:"review"`
	// Redacted is as in PostResult.
	Redacted []string `json:"redacted,omitempty"`
}

// ReviewTask accepts or rejects a done result. Only the sender may: the agent that sent
// it, or on the dashboard a person of the sending company; afterwards the task never
// changes.
func (s *Service) ReviewTask(ctx context.Context, sc tenancy.Scope, taskID, verdict, comment string) (ReviewResult, error) {
	if err := requireAgreement(sc); err != nil {
		return ReviewResult{}, err
	}
	if verdict != VerdictAccepted && verdict != VerdictRejected {
		return ReviewResult{}, invalid("verdict must be accepted or rejected")
	}
	id, err := uuid.Parse(taskID)
	if err != nil {
		return ReviewResult{}, taskNotFound(taskID)
	}
	var redacted []string
	if comment, err = s.mask(comment, 0, &redacted); err != nil {
		return ReviewResult{}, err
	}
	at := s.now()
	var status string
	err = s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) error {
		// The host's people see every task; an agent, only its company's.
		t, err := s.lockTask(ctx, tx, sc, id, taskID, sc.IsPerson())
		if err != nil {
			return err
		}
		switch {
		case sc.IsPerson() && t.FromOrgID != sc.OrgID:
			return apperr.New(apperr.Forbidden, "Only the company that sent task %s can accept or reject its result", id)
		case !sc.IsPerson() && (t.FromAgentID == nil || *t.FromAgentID != sc.AgentID):
			return apperr.New(apperr.Forbidden, "Only the agent that sent task %s can accept or reject its result", id)
		}
		if t.Review != nil {
			return apperr.New(apperr.Conflict, "Task %s was already %s and cannot change", id, *t.Review)
		}
		if t.Status != "done" {
			return apperr.New(apperr.Conflict, "Task %s is %s: only a done result can be accepted or rejected", id, t.Status)
		}
		status = t.Status
		if err := s.Q.TaskReview(ctx, tx, db.TaskReviewParams{ProjectID: sc.ProjectID, ID: id, Review: &verdict, ReviewComment: optText(comment)}); err != nil {
			return err
		}
		if err := audit.RecordIntended(ctx, tx); err != nil {
			return err
		}
		return s.card(ctx, tx, sc, "task", fmt.Sprintf("[task] Result of %q %s.", excerpt(t.Goal, 80), verdict), id, at)
	})
	if err != nil {
		return ReviewResult{}, pg.Classify("review task", err)
	}
	return ReviewResult{TaskID: id.String(), Status: status, State: stateOf[status], Review: verdict, Redacted: redacted}, nil
}

// maxPartsNamed bounds the part names an unknown recipient's error lists.
const maxPartsNamed = 20

// partList names a project's parts for an error, the main part first, at most
// maxPartsNamed of them and then how many more.
func partList(parts []string) string {
	out := strings.Join(parts[:min(len(parts), maxPartsNamed)], ", ")
	if len(parts) > maxPartsNamed {
		out += fmt.Sprintf(" and %d more", len(parts)-maxPartsNamed)
	}
	return out + "."
}
