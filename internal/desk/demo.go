package desk

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Demo's size: DemoConversations over the DemoDays before now, in the workspace's days.
const (
	DemoConversations = 60
	DemoDays          = 45
)

// demoTopics are the demo's conversations: a subject, the customer's first message and a
// member's answer.
var demoTopics = []struct{ subject, ask, answer string }{
	{"Password reset email never arrives", "I asked for a password reset twice and got nothing.", "The reset went to your old address; I updated it, please try again."},
	{"Invoice shows the wrong company name", "Our invoice still says Initech. We renamed to Initrode.", "Fixed: the next invoice carries the new name, and I reissued last month's."},
	{"Export to Excel cuts long notes", "Exported conversations lose everything after 255 characters.", "That is an Excel cell limit; the CSV export keeps the full text."},
	{"Can we add a second inbox?", "We want a separate inbox for our billing questions.", "Yes: Settings, Inboxes, New inbox. Growth includes five."},
	{"Webhook retries look duplicated", "Our endpoint received the same event three times.", "Retries reuse the event id; deduplicate on it as the docs describe."},
	{"Refund for an unused seat", "We paid for ten seats and use eight.", "I refunded the two unused seats; it shows in 5-10 days."},
	{"Mobile app logs me out", "The iOS app logs me out every morning.", "Update to 4.2: it keeps the session across restarts."},
	{"Change the billing address", "Please change our billing address to Berlin.", "Done; the next invoice uses the Berlin address."},
	{"Slow search in big inboxes", "Search takes several seconds in our support inbox.", "We rebuilt your search index; it answers in well under a second now."},
	{"SSO login fails for new staff", "New hires get an error when they sign in with SSO.", "Their accounts needed the SSO group; your admin can add them in Settings."},
}

// SeedDemo stores the demo's conversations in a workspace, in the caller's transaction:
// DemoConversations over the last DemoDays of its calendar (tz), with customer messages,
// automated notifications, members' replies and private notes, in the first two inboxes
// of out. The newest is the contract's example, a CSV import question not yet answered.
// Every conversation has an external id, so seeding again adds nothing. It returns how
// many it added.
func SeedDemo(ctx context.Context, tx *pg.Tx, orgID uuid.UUID, tz string, now time.Time, inboxes []string, members []uuid.UUID) (int, error) {
	q := db.New()
	loc, err := tenancy.LoadTimezone(tz)
	if err != nil {
		return 0, fmt.Errorf("desk demo: timezone: %w", err)
	}
	if len(inboxes) == 0 || len(members) == 0 {
		return 0, fmt.Errorf("desk demo: an inbox and a member are required")
	}
	ids := make([]int64, 0, len(inboxes))
	for _, in := range inboxes {
		n, ok := parseID(PrefixInbox, in)
		if !ok {
			return 0, fmt.Errorf("desk demo: %q is not an inbox id", in)
		}
		ids = append(ids, n)
	}
	r := rand.New(rand.NewPCG(1042, 2026)) // the same demo on every machine
	today := now.In(loc)
	added := 0
	for i := range DemoConversations {
		// Spread from DemoDays ago to today, during the workspace's office hours.
		day := today.AddDate(0, 0, -(DemoDays-1)+i*DemoDays/DemoConversations)
		created := time.Date(day.Year(), day.Month(), day.Day(), 8+r.IntN(9), r.IntN(60), 0, 0, loc).UTC()
		if created.After(now) {
			created = now.Add(-time.Duration(DemoConversations-i) * time.Minute)
		}
		topic := demoTopics[i%len(demoTopics)]
		member := &members[r.IntN(len(members))]
		c := NewConversation{ExternalID: fmt.Sprintf("demo-%02d", i), InboxID: ids[0], Subject: topic.subject, Status: StatusOpen,
			AssigneeID: member, CustomerEmail: fmt.Sprintf("customer%02d@example.com", i), CustomerName: fmt.Sprintf("Customer %d", i),
			CreatedAt: created}
		if i%4 == 3 && len(ids) > 1 {
			c.InboxID = ids[1]
		}
		at := created
		add := func(typ, body string, after time.Duration, author *uuid.UUID) {
			if at = at.Add(after); at.After(now) {
				return // history only: nothing in the future
			}
			c.Messages = append(c.Messages, NewMessage{Type: typ, Body: body, CreatedAt: at, AuthorID: author})
		}
		add(TypeCustomer, topic.ask, 0, nil)
		add(TypeAutomated, "We received your request and will answer within one business day.", 5*time.Second, nil)
		if i%3 == 0 {
			add(TypeNote, "Checked the account: nothing unusual. Answering now.", time.Duration(2+r.IntN(30))*time.Minute, member)
		}
		switch {
		case i == DemoConversations-1:
			// The contract's example: a fresh CSV import question, nobody has answered yet.
			c.Subject, c.InboxID, c.AssigneeID = "CSV import fails", ids[0], nil
			c.Messages = nil
			at = created
			add(TypeCustomer, "My CSV upload fails. Which columns are required?", 0, nil)
			add(TypeAutomated, "We received your request and will answer within one business day.", 5*time.Second, nil)
			add(TypeNote, "Second CSV question this week: check the import docs before answering.", 10*time.Minute, &members[0])
		case i >= DemoConversations-6:
			// The most recent ones wait for a first answer.
		default:
			reply := &members[r.IntN(len(members))]
			add(TypeReply, topic.answer, time.Duration(5+r.IntN(6*60))*time.Minute, reply)
			switch {
			case i%5 == 4:
				add(TypeCustomer, "Thanks, that helps. One more question about it tomorrow.", time.Duration(1+r.IntN(20))*time.Hour, nil)
				c.Status = StatusPending
			case i < DemoConversations-12:
				add(TypeCustomer, "Thanks, all good now.", time.Duration(1+r.IntN(4))*time.Hour, nil)
				if done := at.Add(10 * time.Minute); !done.After(now) {
					c.Status, c.ResolvedAt = StatusResolved, &done
				}
			}
		}
		if i == 0 {
			c.Messages[0].Attachments = []Attachment{{Filename: "screenshot.png", Size: 182044}}
		}
		_, created2, err := AddConversation(ctx, tx, q, orgID, c)
		if err != nil {
			return added, err
		}
		if created2 {
			added++
		}
	}
	return added, nil
}
