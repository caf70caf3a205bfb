package threads_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/threads"
)

// person is a person of the host company acting in project one (what the dashboard's
// resolver gives): the architect's scope with a Person and no part of its own.
func (e *env) person(name string) tenancy.Scope {
	sc := e.sc("architect")
	sc.Person = &tenancy.Person{UserID: uuid.Must(uuid.NewV7()), Name: name, Role: "member", Timezone: "UTC"}
	return sc
}

// TestEveryThreadChangeIsAnnouncedAfterCommit: the dashboard's thread pages are live
// because each change of a project's threads (a message, a read, an event, a composing
// indicator, a close, a person's cancel) sends the project's id on threads.Channel once
// it has committed, through RunNotifier.
func TestEveryThreadChangeIsAnnouncedAfterCommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := setup(t)
	conn, err := pgx.ConnectConfig(ctx, e.d.Ops.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+threads.Channel); err != nil {
		t.Fatal(err)
	}
	go e.svc.RunNotifier(ctx, slog.New(slog.DiscardHandler))
	project := e.sc("architect").ProjectID.String()
	heard := func(what string) {
		t.Helper()
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("%s was not announced: %v", what, err)
		}
		if n.Payload != project {
			t.Fatalf("%s announced %q, want the project %s", what, n.Payload, project)
		}
	}
	arch, back := e.sc("architect"), e.sc("backend")
	sent := must[threads.SendResult](t)(e.svc.Send(ctx, arch, threads.SendInput{To: []string{"backend"}, Subject: "live", Body: "first"}))
	heard("send")
	items := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, back, threads.InboxInput{}))
	must[threads.AckResult](t)(e.svc.Ack(ctx, back, items[0].MessageID))
	heard("ack")
	must[threads.EventResult](t)(e.svc.Event(ctx, back, threads.EventInput{Type: "composing", Detail: json.RawMessage(`{"threadId":"` + sent.ThreadID + `"}`)}))
	heard("composing")
	must[threads.ReplyResult](t)(e.svc.Reply(ctx, back, threads.ReplyInput{ThreadID: sent.ThreadID, Body: "second"}))
	heard("reply")
	must[threads.EventResult](t)(e.svc.Event(ctx, back, threads.EventInput{Type: "deploy"}))
	heard("an event")
	must[threads.CloseResult](t)(e.svc.Close(ctx, arch, threads.CloseInput{ThreadID: sent.ThreadID}))
	heard("close")
	other := e.open(t)
	heard("send")
	must[threads.CancelResult](t)(e.svc.CancelByPerson(ctx, e.person("Ana"), other))
	heard("a person's cancel")
}

func TestCancelByPerson(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	ana := e.person("Ana")

	t.Run("an open thread is canceled, agents are told, and the feed says who", func(t *testing.T) {
		t.Parallel()
		th := e.open(t)
		res := must[threads.CancelResult](t)(e.svc.CancelByPerson(ctx, ana, th))
		if res.Status != threads.StatusCanceled {
			t.Fatalf("%+v", res)
		}
		if r := must[threads.CloseResult](t)(e.svc.Close(ctx, e.sc("backend"), threads.CloseInput{ThreadID: th})); r.Status != threads.StatusCanceled {
			t.Fatalf("close after the cancel: %+v", r)
		}
		_, err := e.svc.Reply(ctx, e.sc("backend"), threads.ReplyInput{ThreadID: th, Body: "hello?"})
		testfix.WantErr(t, err, apperr.Conflict, threads.ReasonThreadCanceled)
		if !slicesContain(e.waker.canceledIDs(), th) {
			t.Fatal("the thread's wakes were not canceled")
		}
		feed := must[[]threads.Activity](t)(e.svc.ActivityForPeople(ctx, ana, uuid.Nil, nil))
		found := false
		for _, a := range feed {
			found = found || (a.Type == threads.EventCanceled && strings.Contains(string(a.Detail), `"by": "Ana [`) && strings.Contains(string(a.Detail), th))
		}
		if !found {
			t.Fatalf("no %s event naming Ana: %+v", threads.EventCanceled, feed)
		}
		// Again: nothing changes.
		if r := must[threads.CancelResult](t)(e.svc.CancelByPerson(ctx, ana, th)); r.Status != threads.StatusCanceled {
			t.Fatalf("a second cancel: %+v", r)
		}
	})

	t.Run("a closed thread stays closed", func(t *testing.T) {
		t.Parallel()
		th := e.open(t)
		must[threads.CloseResult](t)(e.svc.Close(ctx, e.sc("architect"), threads.CloseInput{ThreadID: th}))
		_, err := e.svc.CancelByPerson(ctx, ana, th)
		testfix.WantErr(t, err, apperr.Conflict, "")
	})

	t.Run("an agent's scope cannot cancel as a person, and another project's thread is not found", func(t *testing.T) {
		t.Parallel()
		th := e.open(t)
		_, err := e.svc.CancelByPerson(ctx, e.sc("backend"), th)
		testfix.WantErr(t, err, apperr.Forbidden, "")
		peter := e.sc("peter")
		peter.Person = &tenancy.Person{UserID: uuid.Must(uuid.NewV7()), Name: "Ivy"}
		_, err = e.svc.CancelByPerson(ctx, peter, th)
		testfix.WantErr(t, err, apperr.NotFound, threads.ReasonThreadNotFound)
		if v := must[threads.PersonThreadView](t)(e.svc.ThreadForPeople(ctx, ana, th)); v.Status != threads.StatusOpen {
			t.Fatalf("a refused cancel changed the thread: %s", v.Status)
		}
	})
}

func TestUsageForPeopleSumsPerDayPartAndModel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	for _, part := range []string{"backend", "backend", "frontend"} {
		must[threads.EventResult](t)(e.svc.Event(ctx, e.sc(part), threads.EventInput{Type: "work",
			Usage: &threads.Usage{InputTokens: i64(100), OutputTokens: i64(20), CostUSD: ptr(0.25), Model: "m1"}}))
	}
	rows := must[[]threads.UsageRow](t)(e.svc.UsageForPeople(ctx, e.person("Ana"), 1))
	if len(rows) != 2 || rows[0].Part != "backend" || rows[0].Events != 2 || rows[0].InputTokens != 200 || rows[0].CostUsd != 0.5 ||
		rows[1].Part != "frontend" || rows[1].OutputTokens != 20 {
		t.Fatalf("%+v", rows)
	}
	for _, days := range []int{0, threads.MaxUsageDays + 1} {
		_, err := e.svc.UsageForPeople(ctx, e.person("Ana"), days)
		testfix.WantErr(t, err, apperr.Invalid, "")
	}
}

func slicesContain(ids []uuid.UUID, id string) bool {
	for _, v := range ids {
		if v.String() == id {
			return true
		}
	}
	return false
}

func (w *recWaker) canceledIDs() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]uuid.UUID(nil), w.canceled...)
}
