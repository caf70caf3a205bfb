package threads_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/wake"
)

// The cast: architect (main, with the urgent and needsHuman capabilities), backend,
// frontend and reader (read access) in project one; peter in project two.
var cast = []string{"architect, main: true, capabilities: [urgent, needsHuman]", "backend", "frontend", "reader, access: read"}

func detector(t testing.TB) *secrets.Detector { return testfix.Detector(t) }

// recWaker is a real, minimal Waker that records what it was asked inside the caller's
// transaction, to assert the hook is called; it delivers nothing.
type recWaker struct {
	mu        sync.Mutex
	queued    []wake.Request
	canceled  []uuid.UUID
	withdrawn []uuid.UUID // acked message ids
}

func (w *recWaker) Queue(_ context.Context, _ *pg.Tx, r wake.Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queued = append(w.queued, r)
	return nil
}

func (w *recWaker) Withdraw(_ context.Context, _ *pg.Tx, _, _, _, messageID uuid.UUID) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.withdrawn = append(w.withdrawn, messageID)
	return nil
}

func (w *recWaker) CancelThread(_ context.Context, _ *pg.Tx, _, threadID uuid.UUID) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.canceled = append(w.canceled, threadID)
	return nil
}

type env struct {
	*testfix.Bundle
	d      *pg.DB
	url    string
	svc    *threads.Service
	know   *knowledge.Service
	waker  *recWaker
	res    admin.Result
	scopes map[string]tenancy.Scope // by part
}

func setup(t testing.TB) *env {
	t.Helper()
	b := testfix.Seed(t, testfix.TwoProjects(cast...))
	e := &env{Bundle: b, d: b.DB, url: b.URL, res: b.Result, waker: &recWaker{}, scopes: b.CastScopes(t, cast...)}
	var err error
	if e.know, err = knowledge.New(knowledge.Deps{DB: b.DB, Detector: detector(t), Now: time.Now}); err != nil {
		t.Fatal(err)
	}
	e.svc = threads.New(threads.Deps{DB: b.DB, Now: time.Now, Knowledge: e.know, Waker: e.waker, Secrets: e.know.Detector})
	return e
}

func (e *env) sc(part string) tenancy.Scope { return e.scopes[part] }

// exec runs SQL as the operator (the owner), outside any tenant.
func (e *env) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	e.Exec(t, sql, args...)
}

func (e *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	return e.Count(t, sql, args...)
}

// send sends in as the part from, failing the test when the send is refused.
func (e *env) send(t testing.TB, from string, in threads.SendInput) threads.SendResult {
	t.Helper()
	r, err := e.svc.Send(context.Background(), e.sc(from), in)
	if err != nil {
		t.Fatalf("send as %s: %v", from, err)
	}
	return r
}

func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
