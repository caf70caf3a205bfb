package threads_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/wake"
)

const fixture = `
organisations:
  - {slug: acme, name: Acme Corp}
  - {slug: initech, name: Initech}
agents:
  - {org: acme, slug: architect, name: Architect}
  - {org: acme, slug: backend, name: Backend}
  - {org: acme, slug: frontend, name: Frontend}
  - {org: acme, slug: reader, name: Reader}
  - {org: initech, slug: peter, name: Peter}
projects:
  - slug: one
    name: One
    host: acme
    members:
      - {agent: acme/architect, part: architect, main: true, capabilities: [urgent, needsHuman]}
      - {agent: acme/backend, part: backend}
      - {agent: acme/frontend, part: frontend}
      - {agent: acme/reader, part: reader, access: read}
  - slug: two
    name: Two
    host: initech
    members:
      - {agent: initech/peter, part: peter}
`

var (
	detOnce sync.Once
	det     *secrets.Detector
	detErr  error
)

func detector(t testing.TB) *secrets.Detector {
	detOnce.Do(func() { det, detErr = secrets.NewDetector() })
	if detErr != nil {
		t.Fatal(detErr)
	}
	return det
}

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
	ctx := context.Background()
	d, u := pgtest.Open(t)
	adm := admin.New(d, "http://x.test")
	f, err := admin.ParseFile(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	res, err := adm.Apply(ctx, f, admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{d: d, url: u, res: res, waker: &recWaker{}, scopes: map[string]tenancy.Scope{}}
	if e.know, err = knowledge.New(knowledge.Deps{DB: d, Q: db.New(), Detector: detector(t), Now: time.Now}); err != nil {
		t.Fatal(err)
	}
	e.svc = threads.New(threads.Deps{DB: d, Q: db.New(), Now: time.Now, Knowledge: e.know, Waker: e.waker, Secrets: e.know.Detector})
	r := &tenancy.Resolver{DB: d, Q: db.New()}
	for _, p := range []struct{ project, part, agent string }{
		{"one", "architect", "acme/architect"}, {"one", "backend", "acme/backend"}, {"one", "frontend", "acme/frontend"},
		{"one", "reader", "acme/reader"}, {"two", "peter", "initech/peter"},
	} {
		sc, err := r.Part(ctx, res.Projects[p.project].ConnectCode, p.part, res.Agents[p.agent].Key)
		if err != nil {
			t.Fatalf("resolve %s: %v", p.part, err)
		}
		e.scopes[p.part] = sc
	}
	return e
}

func (e *env) sc(part string) tenancy.Scope { return e.scopes[part] }

// exec runs SQL as the operator (the owner), outside any tenant.
func (e *env) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
		_, err := tx.Exec(context.Background(), sql, args...)
		return err
	})
	if err != nil {
		t.Fatalf("exec %s: %v", sql, err)
	}
}

func (e *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), sql, args...).Scan(&n)
	})
	if err != nil {
		t.Fatalf("count %s: %v", sql, err)
	}
	return n
}

func wantErr(t testing.TB, err error, code apperr.Code, reason string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok {
		t.Fatalf("want %s/%s, got %v", code, reason, err)
	}
	if e.Code != code || (reason != "" && e.Reason != reason) {
		t.Fatalf("want %s/%s, got %s/%s: %s", code, reason, e.Code, e.Reason, e.Message)
	}
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
