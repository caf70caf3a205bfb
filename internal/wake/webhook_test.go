package wake_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wake"
)

type hit struct {
	at   time.Time
	body []byte
	sig  string
	id   string
	from string // the connection's remote address
}

// receiver is a webhook endpoint answering with the statuses given, then 200.
type receiver struct {
	mu       sync.Mutex
	hits     []hit
	statuses []int
	srv      *httptest.Server
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits = append(r.hits, hit{at: time.Now(), body: b, sig: req.Header.Get(wake.HeaderSignature), id: req.Header.Get(wake.HeaderWakeID), from: req.RemoteAddr})
		status := http.StatusOK
		if n := len(r.hits); n <= len(r.statuses) {
			status = r.statuses[n-1]
		} else if len(r.statuses) > 0 && r.statuses[len(r.statuses)-1] < 0 {
			status = -r.statuses[len(r.statuses)-1] // negative last status: repeat forever
		}
		r.mu.Unlock()
		if status < 0 {
			status = -status
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// webhookSetup gives agent alpha (part a) a webhook on rec (on loopback, which the
// service may reach here) and starts delivery: a job runner with a fast backoff and the
// service's listener.
func webhookSetup(t *testing.T, rec *receiver, maxAttempts int) (*fixture, string) {
	t.Helper()
	return webhookSetupReaching(t, rec, maxAttempts, true)
}

// webhookSetupReaching is webhookSetup with the service then delivering to private
// addresses or not (the webhook is set while it may, so that it names loopback).
func webhookSetupReaching(t *testing.T, rec *receiver, maxAttempts int, private bool) (*fixture, string) {
	t.Helper()
	f := setup(t)
	key := hex.EncodeToString(make([]byte, 32))
	box, err := wake.NewSecretBox(key)
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Box = box
	f.svc.MaxAttempts = maxAttempts
	f.svc.Now = nil // real time: River schedules retries on the wall clock
	f.svc.PrivateTargets = true
	_, secret, err := f.svc.SetWebhook(f.ctx, "acme/alpha", rec.srv.URL+"/hook")
	if err != nil {
		t.Fatal(err)
	}
	f.svc.PrivateTargets = private
	r := jobs.New(f.d.Ops, jobs.Options{RetryBase: 150 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond})
	if err := f.svc.RegisterJobs(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); f.svc.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = r.Stop(sctx)
		cancel()
		<-done
	})
	if !strings.HasPrefix(secret, wake.SecretPrefix) {
		t.Fatalf("secret %q", secret)
	}
	// Only ciphertext at rest.
	var stored []byte
	f.op(func(tx *pg.Tx) error {
		return tx.QueryRow(f.ctx, `SELECT secret_enc FROM wake_target`).Scan(&stored)
	})
	if strings.Contains(string(stored), secret[len(wake.SecretPrefix):]) {
		t.Fatal("the webhook secret is stored in plaintext")
	}
	return f, secret
}

func (f *fixture) status(part string) string {
	ws := f.wakes(part)
	if len(ws) == 0 {
		return ""
	}
	return ws[len(ws)-1].Status
}

// TestWebhookSignedDelivery: a queued wake reaches the webhook at once, signed so the
// receiver can verify it, and is marked delivered.
func TestWebhookSignedDelivery(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t)
	f, secret := webhookSetup(t, rec, 3)
	var h hit
	testfix.Step(t, "a queued wake is posted once and marked delivered", func(t *testing.T) {
		f := f.in(t)
		f.queue(f.msg("a"))
		testfix.WaitFor(t, "delivery", 10*time.Second, func() bool { return f.status("a") == wake.StatusDelivered })
		hits := rec.got()
		if len(hits) != 1 {
			t.Fatalf("%d posts, want 1", len(hits))
		}
		h = hits[0]
	})
	testfix.Step(t, "the signature verifies with the secret", func(t *testing.T) {
		if err := wake.Verify(secret, h.sig, h.body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("signature does not verify: %v", err)
		}
	})
	testfix.Step(t, "the signature does not verify with another secret", func(t *testing.T) {
		if err := wake.Verify("whsec_wrong", h.sig, h.body, time.Now(), 5*time.Minute); err == nil {
			t.Error("signature verified with the wrong secret")
		}
	})
	testfix.Step(t, "the signature does not verify a changed body", func(t *testing.T) {
		if err := wake.Verify(secret, h.sig, append(h.body, ' '), time.Now(), 5*time.Minute); err == nil {
			t.Error("signature verified a changed body")
		}
	})
	testfix.Step(t, "the body is the wake", func(t *testing.T) {
		var w wake.Wake
		if err := json.Unmarshal(h.body, &w); err != nil {
			t.Fatalf("body %s: %v", h.body, err)
		}
		testfix.Check(t, "id", w.ID.String(), h.id)
		testfix.Check(t, "part", w.Part, "a")
		testfix.Check(t, "agent", w.Agent, "acme/alpha")
		testfix.Check(t, "count", w.Count, 1)
		testfix.Check(t, "project", w.Project, "One")
	})
	testfix.Step(t, "a part without a webhook keeps its wake for pagers", func(t *testing.T) {
		f := f.in(t)
		f.queue(f.msg("b"))
		time.Sleep(300 * time.Millisecond)
		testfix.Check(t, "b's wake", f.status("b"), wake.StatusPending)
		testfix.Check(t, "posts", len(rec.got()), 1)
	})
}

// TestWebhookRetriesThenDelivers: 500s are retried with backoff until the receiver accepts.
func TestWebhookRetriesThenDelivers(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t, 500, 503)
	f, _ := webhookSetup(t, rec, 5)
	f.queue(f.msg("a"))
	testfix.WaitFor(t, "delivery after retries", 20*time.Second, func() bool { return f.status("a") == wake.StatusDelivered })
	hits := rec.got()
	if len(hits) != 3 {
		t.Fatalf("%d posts, want 3 (two failures, one success)", len(hits))
	}
	if gap := hits[1].at.Sub(hits[0].at); gap < 100*time.Millisecond {
		t.Fatalf("retried after %v: no backoff", gap)
	}
	if hits[0].id != hits[2].id {
		t.Fatal("a retry carried another wake id")
	}
}

// TestOneDeliveryAPartAtATime: while a part's delivery was retried, newer work opened a
// pending wake that the next dispatch sent too: a receiver that stalled got a delivery
// per wake, each holding a delivery worker (every tenant's deliveries, and the sweep,
// waited behind them). The newer wake now waits for the first to settle, then goes at
// once.
func TestOneDeliveryAPartAtATime(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t, 500, 500) // the first wake fails twice, then everything is taken
	f, _ := webhookSetup(t, rec, 5)
	f.queue(f.msg("a"))
	testfix.WaitFor(t, "the first attempt", 10*time.Second, func() bool { return len(rec.got()) >= 1 })
	f.queue(f.msg("a")) // newer work while the first wake is being retried
	testfix.WaitFor(t, "both wakes delivered", 20*time.Second, func() bool {
		ws := f.wakes("a")
		return len(ws) == 2 && ws[0].Status == wake.StatusDelivered && ws[1].Status == wake.StatusDelivered
	})
	hits := rec.got()
	first := hits[0].id
	lastFirst, firstSecond := -1, -1
	for i, h := range hits {
		if h.id == first {
			lastFirst = i
		} else if firstSecond < 0 {
			firstSecond = i
		}
	}
	if firstSecond < 0 || firstSecond < lastFirst {
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.id
		}
		t.Fatalf("the second wake was sent while the first was retried: %v", ids)
	}
}

// TestOneOrganisationHoldsFewDeliveryWorkers: one tenant whose receivers accepted and
// stalled held every delivery worker, and every other tenant's deliveries waited. An
// organisation has at most MaxDeliveriesPerOrg posts in flight; the rest wait their turn,
// their attempts not counted.
func TestOneOrganisationHoldsFewDeliveryWorkers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	inFlight, most, posts := 0, 0, 0
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight, posts = inFlight+1, posts+1
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	t.Cleanup(stall.Close)
	f, _ := webhookSetup(t, newReceiver(t), 3)
	f.svc.MaxDeliveriesPerOrg = 2
	f.svc.PrivateTargets = true
	for _, agent := range []string{"acme/alpha", "acme/beta", "acme/gamma", "acme/lead"} {
		if _, _, err := f.svc.SetWebhook(f.ctx, agent, stall.URL+"/hook"); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range []string{"a", "b", "c", "lead"} {
		f.queue(f.msg(part))
	}
	testfix.WaitFor(t, "two posts held", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return inFlight == 2 })
	time.Sleep(700 * time.Millisecond) // the other two are dispatched meanwhile, and wait their turn
	mu.Lock()
	held := most
	mu.Unlock()
	close(release)
	if held != 2 {
		t.Fatalf("%d posts of one organisation in flight at once, want 2", held)
	}
	testfix.WaitFor(t, "every wake delivered", 20*time.Second, func() bool {
		for _, p := range []string{"a", "b", "c", "lead"} {
			if f.status(p) != wake.StatusDelivered {
				return false
			}
		}
		return true
	})
}

// TestHeldWakesDoNotHideOthers: the dispatch looked at a fixed page of projects (5,000,
// in no order, the same set each time): when it was full of projects whose webhook wakes
// were all held (parked, over budget, online), the other projects' wakes were never sent.
// It pages through the projects in order, from where the last dispatch stopped.
func TestHeldWakesDoNotHideOthers(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t)
	f, _ := webhookSetup(t, rec, 3)
	f.svc.DispatchProjects = 1 // a page of one project: the held one fills it
	f.svc.PrivateTargets = true
	if _, _, err := f.svc.SetWebhook(f.ctx, "initech/peter", rec.srv.URL+"/hook"); err != nil {
		t.Fatal(err)
	}
	// The project that sorts first holds a parked part's wake; the other, a deliverable one.
	held, open := f.project, f.other
	heldPart, openPart := "a", "peter"
	if f.other.String() < f.project.String() {
		held, open, heldPart, openPart = f.other, f.project, "peter", "a"
	}
	f.exec(`UPDATE membership SET parked_until = now() + interval '1 day' WHERE project_id = $1 AND part = $2`, held, heldPart)
	heldMsg, openMsg := f.msg(), f.msg()
	heldMsg.ProjectID, heldMsg.MemberIDs = held, []uuid.UUID{f.member[heldPart]}
	openMsg.ProjectID, openMsg.MemberIDs = open, []uuid.UUID{f.member[openPart]}
	f.queue(heldMsg)
	f.queue(openMsg)
	for range 3 {
		if _, err := f.svc.Dispatch(f.ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	testfix.WaitFor(t, "the deliverable wake's post", 10*time.Second, func() bool { return len(rec.got()) == 1 })
}

// TestWebhookDeadLetter: a receiver that keeps failing gets exactly MaxAttempts posts,
// with growing gaps and none after; the wake is then a dead letter people can list. A
// 4xx refusal is dead at once.
// TestWebhookConnectionsAreReused: deliveries share the service's client, so a receiver
// is posted to over one kept-alive connection instead of a new one (and a new handshake,
// and a connection left open) per wake.
func TestWebhookConnectionsAreReused(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t)
	f, _ := webhookSetup(t, rec, 3)
	for i := range 3 {
		f.queue(f.msg("a"))
		testfix.WaitFor(t, "delivery", 10*time.Second, func() bool { return len(rec.got()) == i+1 && f.status("a") == wake.StatusDelivered })
	}
	from := map[string]bool{}
	for _, h := range rec.got() {
		from[h.from] = true
	}
	if len(from) != 1 {
		t.Fatalf("3 deliveries came over %d connections: %v", len(from), from)
	}
}

// TestWebhookTargetsArePublic: an organisation's admin cannot make the server post into
// its own machine or network (unless the server allows private targets).
func TestWebhookTargetsArePublic(t *testing.T) {
	t.Parallel()
	testfix.Step(t, "an address of the server's machine or network is refused when set", func(t *testing.T) {
		f := setup(t)
		box, err := wake.NewSecretBox(hex.EncodeToString(make([]byte, 32)))
		if err != nil {
			t.Fatal(err)
		}
		f.svc.Box = box
		for _, u := range []string{"http://127.0.0.1:5432/", "https://localhost:6060/debug/pprof/", "https://169.254.169.254/latest/meta-data/",
			"https://10.0.0.7:8443/admin", "https://192.168.1.1/", "http://[::1]:9000/", "https://[fd00::1]/", "https://0.0.0.0/"} {
			_, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", u)
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || e.Message != wake.MsgWebhookPrivate {
				t.Errorf("%s: %v", u, err)
			}
		}
		if _, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", "http://hooks.example.com/wake"); err == nil || !strings.Contains(err.Error(), wake.MsgWebhookHTTPS) {
			t.Errorf("plain http to a public host: %v", err)
		}
		if _, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", "https://hooks.example.com/wake"); err != nil {
			t.Errorf("a public https host: %v", err)
		}
	})
	testfix.Step(t, "a private address is refused again when it is dialled (as a name resolving to one is)", func(t *testing.T) {
		rec := newReceiver(t)
		f, _ := webhookSetupReaching(t, rec, 2, false)
		f.queue(f.msg("a"))
		testfix.WaitFor(t, "the dead letter", 30*time.Second, func() bool { return f.status("a") == wake.StatusDead })
		if n := len(rec.got()); n != 0 {
			t.Fatalf("%d posts reached the private address", n)
		}
		dead, err := f.svc.List(f.ctx, wake.StatusDead, 10)
		if err != nil || len(dead) != 1 || dead[0].LastError == nil || !strings.Contains(*dead[0].LastError, "not a public address") {
			t.Fatalf("dead letters: %+v %v", dead, err)
		}
		// The error people read (a guest's webhook under the host's eyes too) does not
		// quote the URL, which may carry a token.
		if strings.Contains(*dead[0].LastError, "/hook") {
			t.Fatalf("the last error quotes the webhook's URL: %s", *dead[0].LastError)
		}
	})
}

func TestWebhookDeadLetter(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t, -500)
	f, _ := webhookSetup(t, rec, 4)
	f.queue(f.msg("a"))
	testfix.WaitFor(t, "dead letter", 30*time.Second, func() bool { return f.status("a") == wake.StatusDead })
	time.Sleep(1500 * time.Millisecond) // no further attempts: no retry storm
	hits := rec.got()
	if len(hits) != 4 {
		t.Fatalf("%d posts, want exactly 4", len(hits))
	}
	// Backoff base 150 ms, doubling, ±10 %: each gap at least its step of the policy.
	for i := 1; i < len(hits); i++ {
		minGap := time.Duration(float64(150*time.Millisecond<<(i-1)) * 0.85)
		if gap := hits[i].at.Sub(hits[i-1].at); gap < minGap {
			t.Fatalf("attempt %d came %v after the previous, before its backoff of ~%v", i+1, gap, minGap)
		}
	}
	dead, err := f.svc.List(f.ctx, wake.StatusDead, 10)
	if err != nil || len(dead) != 1 || dead[0].Part != "a" || dead[0].Attempts != 4 || dead[0].LastError == nil {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
	// New work still opens a fresh wake for the part; while it is pending the dead letter
	// cannot be retried (it would be a second pending wake).
	f.exec(`DELETE FROM wake_target`) // keep the new wake pending
	f.queue(f.msg("a"))
	if n := len(f.wakes("a")); n != 2 {
		t.Fatalf("%d wakes after new work, want 2", n)
	}
	if _, err := f.svc.Retry(f.ctx, dead[0].ID); err == nil {
		t.Fatal("retried a dead letter while its part has a pending wake")
	}

	rec2 := newReceiver(t, 410)
	g, _ := webhookSetup(t, rec2, 4)
	g.queue(g.msg("a"))
	testfix.WaitFor(t, "dead letter on 410", 30*time.Second, func() bool { return g.status("a") == wake.StatusDead })
	time.Sleep(500 * time.Millisecond)
	if n := len(rec2.got()); n != 1 {
		t.Fatalf("a 410 was retried: %d posts", n)
	}
	// A person retries the dead letter: it is sent again (and accepted this time).
	ws := g.wakes("a")
	if retried, err := g.svc.Retry(g.ctx, ws[0].ID); err != nil || !retried {
		t.Fatalf("retry: %v %v", retried, err)
	}
	// Again at once: pending already, nothing to do (as a second revoke), not a refusal.
	if retried, err := g.svc.Retry(g.ctx, ws[0].ID); err != nil || retried {
		t.Fatalf("a second retry: %v %v, want nothing done and no error", retried, err)
	}
	testfix.WaitFor(t, "the retried dead letter", 10*time.Second, func() bool { return len(rec2.got()) == 2 && g.status("a") == wake.StatusDelivered })
}

// TestWebhookRetryAfterRevocation: a wake taken while the guest's agreement was active is
// not posted again once the agreement is revoked: the retry finds the part no longer
// admitted and puts the wake back to wait (it names the project, its threads and its last
// item, which a refused guest must not learn).
func TestWebhookRetryAfterRevocation(t *testing.T) {
	t.Parallel()
	f, _ := webhookSetup(t, newReceiver(t), 5)
	var mu sync.Mutex
	posts := 0
	guest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		posts++
		if posts == 1 {
			// The host revokes the agreement while the first post fails: the retry
			// comes after the revocation.
			f.exec(`UPDATE agreement SET status = 'revoked' WHERE project_id = $1`, f.project)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(guest.Close)
	if _, _, err := f.svc.SetWebhook(f.ctx, "initech/peter", guest.URL+"/hook"); err != nil {
		t.Fatal(err)
	}
	f.queue(f.msg("guest"))
	testfix.WaitFor(t, "the first post", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return posts == 1 })
	testfix.WaitFor(t, "the wake back to pending", 10*time.Second, func() bool { return f.status("guest") == wake.StatusPending })
	time.Sleep(time.Second) // several backoff steps (150 ms, doubling): no further post
	mu.Lock()
	defer mu.Unlock()
	if posts != 1 {
		t.Fatalf("%d posts to the revoked guest's webhook, want 1 (the one before the revocation)", posts)
	}
}

// TestLostDeliveryIsSentAgain: a wake left sending by a delivery job that ended without an
// outcome (its replica was killed on the last attempt) is put back by the sweep and sent
// again, once it has been sending longer than any live delivery leaves one; one whose
// part has a newer pending wake meanwhile joins that one (its threads and its urgency
// with it: canceled alone, they were dropped) and is canceled.
func TestLostDeliveryIsSentAgain(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t)
	f, _ := webhookSetup(t, rec, 5)
	// noWebhook removes the webhook and waits out a dispatch already under way: one that
	// listed the webhook's agent before the DELETE took the wake queued next and its job,
	// finding no webhook, put it back to pending (a loaded Citus run). Batches of dispatch
	// run one at a time, so this one returns after it, and those after it list no agent.
	noWebhook := func(t *testing.T) {
		f.exec(`DELETE FROM wake_target`)
		if _, err := f.svc.Dispatch(f.ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// lost makes a wake of part a that is sending, for age, with no job behind it: the
	// webhook is removed while it is queued, so nothing dispatches it meanwhile.
	lost := func(age time.Duration) uuid.UUID {
		noWebhook(t)
		f.queue(f.msg("a"))
		id := f.open("a").ID
		f.exec(`UPDATE wake SET status = 'sending', updated_at = now() - make_interval(secs => $2) WHERE id = $1`, id, age.Seconds())
		return id
	}
	sweep := func(t *testing.T) {
		if _, err := f.svc.Sweep(f.ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	statusOf := func(t *testing.T, id uuid.UUID) (status string) {
		f.in(t).op(func(tx *pg.Tx) error {
			return tx.QueryRow(f.ctx, `SELECT status FROM wake WHERE id = $1`, id).Scan(&status)
		})
		return status
	}
	id := lost(wake.SendingStaleAfter - time.Minute)
	if _, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", rec.srv.URL+"/hook"); err != nil {
		t.Fatal(err)
	}
	t.Run("a delivery that may still be alive is left to its job", func(t *testing.T) {
		sweep(t)
		if st := statusOf(t, id); st != wake.StatusSending || len(rec.got()) != 0 {
			t.Fatalf("the wake is %s after %d posts, want sending and none", st, len(rec.got()))
		}
	})
	t.Run("a lost delivery is sent again", func(t *testing.T) {
		f.exec(`UPDATE wake SET updated_at = now() - make_interval(secs => $2) WHERE id = $1`, id, (wake.SendingStaleAfter + time.Minute).Seconds())
		sweep(t)
		testfix.WaitFor(t, "the lost wake delivered", 10*time.Second, func() bool { return statusOf(t, id) == wake.StatusDelivered })
		if hits := rec.got(); len(hits) != 1 || hits[0].id != id.String() {
			t.Fatalf("posts %+v, want one of wake %s", hits, id)
		}
	})
	t.Run("a lost delivery superseded by a newer pending wake joins it", func(t *testing.T) {
		t1, t2 := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
		noWebhook(t)
		urgent := f.msg("a")
		urgent.ThreadID, urgent.Urgent = t1, true
		f.queue(urgent)
		old := f.open("a").ID
		f.exec(`UPDATE wake SET status = 'sending', updated_at = now() - make_interval(secs => $2) WHERE id = $1`, old, (wake.SendingStaleAfter + time.Minute).Seconds())
		plain := f.msg("a") // newer work: a new pending wake, the webhook still removed
		plain.ThreadID = t2
		f.queue(plain)
		sweep(t)
		if st := statusOf(t, old); st != wake.StatusCanceled {
			t.Fatalf("the lost wake is %s, want canceled", st)
		}
		w := f.open("a") // the newer one, still pending, carries both
		if w.Count != 2 || !w.Urgent || !slices.Contains(w.ThreadIDs, t1.String()) || !slices.Contains(w.ThreadIDs, t2.String()) {
			t.Fatalf("the pending wake: %+v; want the urgent thread's share and urgency joined", w)
		}
	})
}

// TestTheOperatorsRetryIsInTheHostsHistory: `relayroom admin wake retry` leaves the same
// trail as a person's retry on the dashboard, under the operator's name.
func TestTheOperatorsRetryIsInTheHostsHistory(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dead := f.queueIn("a", wake.StatusDead)
	t.Run("the retry is in the host's history under the operator's name", func(t *testing.T) {
		if _, err := f.svc.Retry(audit.AsOperator(f.ctx, "ops"), dead); err != nil {
			t.Fatal(err)
		}
		n := testfix.Scalar[int](t, f.d, `SELECT count(*) FROM audit_event WHERE object_kind = 'wake' AND object_id = $1
			AND action = 'retried' AND actor_name = 'operator ops' AND org_id = $2 AND project_id = $3`,
			dead.String(), f.host[f.project], f.project)
		if n != 1 {
			t.Fatalf("%d audit events for the operator's retry, want 1", n)
		}
	})
	t.Run("an unknown wake is not found", func(t *testing.T) {
		_, err := f.svc.Retry(f.ctx, uuid.New())
		if e, ok := apperr.As(err); !ok || e.Code != apperr.NotFound {
			t.Fatalf("retry of an unknown wake: %v, want NotFound", err)
		}
	})
}

// TestARetryOfAWakeOnItsWayDoesNothing: a retry repeated at once found the first one's
// wake already taken by the webhook dispatch ("sending"), not pending, and was refused
// as if the wake were not a dead letter (seen on Citus in CI). A wake being delivered, or
// delivered, needs no retry: nothing is done and nothing is refused.
func TestARetryOfAWakeOnItsWayDoesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.queue(f.msg("a"))
	w := f.open("a").ID
	for _, status := range []string{wake.StatusClaimed, wake.StatusSending, wake.StatusDelivered} {
		t.Run(status, func(t *testing.T) {
			f.exec(`UPDATE wake SET status = $2 WHERE id = $1`, w, status)
			if retried, err := f.svc.Retry(f.ctx, w); err != nil || retried {
				t.Fatalf("retry of a wake %s: %v %v, want nothing done and no error", status, retried, err)
			}
			if got := f.wakes("a")[0].Status; got != status {
				t.Fatalf("the wake is %s after the retry, want %s untouched", got, status)
			}
		})
	}
	t.Run("canceled is refused", func(t *testing.T) {
		f.exec(`UPDATE wake SET status = 'canceled' WHERE id = $1`, w)
		if _, err := f.svc.Retry(f.ctx, w); err == nil {
			t.Fatal("a canceled wake was retried")
		}
	})
}

// TestRetryRacingNewWork: a person retrying a dead letter while new work opens a pending
// wake for the same part (committed between the retry's check and its write) is told the
// part already has one, as when the new wake came first; never an internal error.
func TestRetryRacingNewWork(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dead := f.queueIn("a", wake.StatusDead)
	other := f.queueIn("a", wake.StatusCanceled)

	// The new work, held open: the part's other wake becomes pending again.
	tx, err := f.d.Ops.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx) //nolint:errcheck // a no-op once committed
	if _, err := tx.Exec(f.ctx, `UPDATE wake SET status = 'pending' WHERE id = $1`, other); err != nil {
		t.Fatal(err)
	}
	retried := make(chan error, 1)
	go func() { _, err := f.svc.Retry(f.ctx, dead); retried <- err }()
	// The retry's write waits on the pending wake's uniqueness until the new work ends (on
	// Citus, on the worker that holds the part's shard).
	testfix.AwaitLockWaitersAt(t, f.url, 1, retried)
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	err = <-retried
	if e, ok := apperr.As(err); !ok || e.Code != apperr.Conflict {
		t.Fatalf("retry racing new work: %v, want the conflict", err)
	}
	if st := f.wakes("a"); st[0].Status != wake.StatusDead {
		t.Fatalf("the dead letter is %s after the refused retry", st[0].Status)
	}
}

// TestSecretKeyRequired: without the server key no webhook can be set.
func TestSecretKeyRequired(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if _, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", "https://example.com/hook"); err == nil {
		t.Fatal("set a webhook without RELAYROOM_SECRET_KEY")
	}
	f.svc.Box, _ = wake.NewSecretBox(strings.Repeat("ab", 32))
	for _, u := range []string{"http://example.com/hook", "ftp://x", "not a url"} {
		if _, _, err := f.svc.SetWebhook(f.ctx, "acme/alpha", u); err == nil {
			t.Fatalf("accepted %q", u)
		}
	}
	if _, _, err := f.svc.SetWebhook(f.ctx, "acme/nobody", "https://example.com/hook"); err == nil {
		t.Fatal("accepted an unknown agent")
	}
	if _, err := wake.NewSecretBox("short"); err == nil {
		t.Fatal("accepted a short key")
	}
}

// TestADeadLetterOfAClosedThreadIsNotSentAgain: closing a thread takes its share out of
// the part's dead letters too. A dead letter about a thread since closed was sent again
// by a retry: the part was woken about a finished conversation, past its budget (the
// letter was charged when first handed out).
func TestADeadLetterOfAClosedThreadIsNotSentAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	th := uuid.Must(uuid.NewV7())
	r := f.msg("a")
	r.ThreadID = th
	f.queue(r)
	w := f.open("a")
	f.exec(`UPDATE wake SET status = 'dead', charged_at = now(), last_error = 'webhook refused: 410' WHERE id = $1`, w.ID)
	f.op(func(tx *pg.Tx) error { return f.svc.CancelThread(f.ctx, tx, f.project, th) })
	t.Run("the dead letter stays for people to see, with nothing left in it", func(t *testing.T) {
		rows := f.wakes("a")
		if len(rows) != 1 || rows[0].Status != "dead" || rows[0].Count != 0 {
			t.Fatalf("%+v", rows)
		}
	})
	t.Run("a retry is refused and wakes nobody", func(t *testing.T) {
		_, err := f.svc.Retry(f.ctx, w.ID)
		if e, ok := apperr.As(err); !ok || e.Code != apperr.Conflict || !strings.Contains(e.Message, "threads have all ended") {
			t.Fatalf("retry: %v", err)
		}
		if got := f.next("a"); got != nil {
			t.Fatalf("woken about a closed thread: %+v", got)
		}
	})
}
