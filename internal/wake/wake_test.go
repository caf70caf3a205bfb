package wake_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/wake"
)

// TestBudgetEnforced: a part is woken at most wakeBudgetPerHour times an hour; work past
// that waits (coalesced, not dropped) and is delivered once the hour of the oldest charge
// has passed.
func TestBudgetEnforced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.budget(3)
	start := f.clock.Now()
	for i := 0; i < 3; i++ {
		f.queue(f.msg("a"))
		f.deliver("a")
		f.clock.Add(time.Minute)
	}
	f.queueTwoHeld("a", "past the budget (the 4th wake within the hour)")
	f.clock.Add(start.Add(time.Hour - time.Second).Sub(f.clock.Now()))
	f.sweep(f.clock.Now())
	if got := f.next("a"); got != nil {
		t.Fatalf("delivered before the budget freed: %+v", got)
	}
	f.clock.Add(2 * time.Second) // the first charge is now more than an hour old
	got := f.next("a")
	if got == nil || got.Count != 2 {
		t.Fatalf("not delivered once the budget freed: %+v", got)
	}
	if ws := f.wakes("a"); !ws[len(ws)-1].Charged {
		t.Fatalf("delivery not charged: %+v", ws)
	}
	// The default budget is 12 when the setting is absent or not a number.
	f.exec(`UPDATE project SET settings = settings || '{"wakeBudgetPerHour": "lots"}' WHERE id = $1`, f.project)
	var b int
	f.op(func(tx *pg.Tx) error {
		return tx.QueryRow(f.ctx, `SELECT rr_wake_budget(settings) FROM project WHERE id = $1`, f.project).Scan(&b)
	})
	if b != 12 {
		t.Fatalf("budget for a malformed setting: %d, want the default 12", b)
	}
}

// TestBudgetKeepsWhatWasHandedOut: a wake is charged when it is handed out, and stays
// charged when its thread is closed afterwards (as agents are told to do once the work is
// done): closing every thread must not let a part be woken past its budget.
func TestBudgetKeepsWhatWasHandedOut(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.budget(2)
	woken := 0
	for range 6 {
		thread := uuid.Must(uuid.NewV7())
		r := f.msg("a")
		r.ThreadID = thread
		f.queue(r)
		w := f.next("a")
		if w == nil {
			f.clock.Add(time.Minute)
			continue
		}
		woken++
		if err := f.d.InTenant(f.ctx, pg.Tenant{ProjectID: f.project}, func(tx *pg.Tx) error {
			return f.svc.CancelThread(f.ctx, tx, f.project, thread)
		}); err != nil {
			t.Fatal(err)
		}
		if st, err := f.svc.Ack(f.ctx, f.agent["a"], w.ID); err != nil || st != wake.StatusCanceled {
			t.Fatalf("ack after the close: %q %v", st, err)
		}
		f.clock.Add(time.Minute)
	}
	if woken != 2 {
		t.Fatalf("woken %d times within 6 minutes on a budget of 2 an hour: %+v", woken, f.wakes("a"))
	}
}

// TestBroadcastChargedPerRecipient: a message to "*" costs each recipient one wake of
// its own budget.
func TestBroadcastChargedPerRecipient(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.budget(1)
	r := f.msg("a", "b", "c")
	r.Broadcast = true
	f.queue(r)
	for _, p := range []string{"a", "b", "c"} {
		f.deliver(p)
	}
	for _, p := range []string{"a", "b", "c"} {
		if ws := f.wakes(p); len(ws) != 1 || !ws[0].Charged {
			t.Fatalf("%s: broadcast wake not charged to it: %+v", p, ws)
		}
	}
	f.queue(f.msg("b"))
	if got := f.next("b"); got != nil {
		t.Fatalf("b's budget of 1 was spent by the broadcast, yet: %+v", got)
	}
	f.none("lead") // not a recipient
}

// TestUrgentPassesBudgetNotPark: urgent work wakes a part whose budget is spent, never a
// parked one.
func TestUrgentPassesBudgetNotPark(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.budget(1)
	f.queue(f.msg("a"))
	f.deliver("a")
	f.queue(f.msg("a"))
	if got := f.next("a"); got != nil {
		t.Fatalf("over budget: %+v", got)
	}
	u := f.msg("a")
	u.Urgent = true
	f.queue(u)
	if got := f.next("a"); got == nil || !got.Urgent || got.Count != 2 {
		t.Fatalf("urgent did not pass the budget: %+v", got)
	}
	f.park("b", f.clock.Now().Add(time.Hour))
	u = f.msg("b")
	u.Urgent = true
	f.queue(u)
	if got := f.next("b"); got != nil {
		t.Fatalf("urgent woke a parked part: %+v", got)
	}
	if w := f.open("b"); w.Charged {
		t.Fatalf("a parked part was charged: %+v", w)
	}
}

// TestParkedGetsNoneAndResumes: a parked part is never woken and spends no budget; the
// sweep unparks it on its first tick past resetAt and its waiting wake is delivered.
func TestParkedGetsNoneAndResumes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	resetAt := f.clock.Now().Add(10 * time.Minute)
	f.park("a", resetAt)
	f.queueTwoHeld("a", "parked")
	parkedUntil := func() *time.Time {
		var p *time.Time
		f.op(func(tx *pg.Tx) error {
			return tx.QueryRow(f.ctx, `SELECT parked_until FROM membership WHERE id = $1`, f.member["a"]).Scan(&p)
		})
		return p
	}
	if res := f.sweep(resetAt.Add(-time.Second)); res.Resumed != 0 || parkedUntil() == nil {
		t.Fatalf("resumed before resetAt: %+v", res)
	}
	// Past resetAt but before the sweep's tick: still parked (the sweep resumes it).
	f.clock.Add(10*time.Minute + time.Second)
	if got := f.next("a"); got != nil {
		t.Fatalf("woken past resetAt before the sweep resumed it: %+v", got)
	}
	if res := f.sweep(resetAt.Add(time.Second)); res.Resumed != 1 || parkedUntil() != nil {
		t.Fatalf("first tick past resetAt: %+v, parked until %v", res, parkedUntil())
	}
	if got := f.next("a"); got == nil || got.Count != 2 {
		t.Fatalf("resumed part's wake: %+v", got)
	}
	// A wake of a part that parks after it was queued waits too.
	f.queue(f.msg("b"))
	f.park("b", f.clock.Now().Add(time.Minute))
	if got := f.next("b"); got != nil {
		t.Fatalf("a part parked after its wake was queued was woken: %+v", got)
	}
}

// TestCoalescing: many messages and tasks, one pending wake carrying the count.
func TestCoalescing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t1, t2 := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	for i := 0; i < 3; i++ {
		r := f.msg("a")
		r.ThreadID = t1
		f.queue(r)
	}
	r := f.msg("a", "a") // the same part twice in one request counts once
	r.ThreadID = t2
	f.queue(r)
	task := f.msg("a")
	task.Source = "task"
	f.queue(task)
	ws := f.wakes("a")
	if len(ws) != 1 {
		t.Fatalf("want one wake, got %+v", ws)
	}
	w := ws[0]
	slices.Sort(w.ThreadIDs)
	want := []string{t1.String(), t2.String()}
	slices.Sort(want)
	if w.Count != 5 || !slices.Equal(w.ThreadIDs, want) || !slices.Equal(w.Sources, []string{"message", "task"}) {
		t.Fatalf("coalesced wake: %+v", w)
	}
	got := f.next("a")
	if got == nil || got.Count != 5 || len(got.ThreadIDs) != 2 {
		t.Fatalf("claimed: %+v", got)
	}
	// Work after the claim opens a new wake (the claimed one may already be read); the
	// admin listing shows it at once (it folds what is waiting).
	f.queue(f.msg("a"))
	if ls, err := f.svc.List(f.ctx, wake.StatusPending, 10); err != nil || len(ls) != 1 || ls[0].Count != 1 || ls[0].Part != "a" {
		t.Fatalf("listed pending wakes: %+v %v", ls, err)
	}
	if w := f.open("a"); w.Count != 1 {
		t.Fatalf("after claim: %+v", w)
	}
}

// TestAWakeNamesBoundedThreads: one part's sends to another grew its pending wake by a
// thread each, without end: every fold rebuilt it, and the pager's answer, a webhook's
// body and the pager's RELAYROOM_THREAD_IDS carried every id. A wake names at most
// wake.MaxThreads threads, those it already names first; the others' messages are still
// counted.
func TestAWakeNamesBoundedThreads(t *testing.T) {
	t.Parallel()
	f := setup(t)
	send := func(n int) {
		for range n {
			r := f.msg("a")
			r.ThreadID = uuid.Must(uuid.NewV7())
			f.queue(r)
		}
	}
	unnamed := func() (n int) {
		f.op(func(tx *pg.Tx) error {
			return tx.QueryRow(f.ctx, `SELECT other_count FROM wake WHERE member_id = $1 AND status = 'pending'`, f.member["a"]).Scan(&n)
		})
		return n
	}
	send(wake.MaxThreads + 5)
	first := f.open("a")
	t.Run("a fold names the bound's threads and counts every message", func(t *testing.T) {
		if first.Count != wake.MaxThreads+5 || len(first.ThreadIDs) != wake.MaxThreads || unnamed() != 5 {
			t.Fatalf("count %d, %d threads named, %d counted unnamed", first.Count, len(first.ThreadIDs), unnamed())
		}
	})
	t.Run("a later fold keeps the threads the wake names", func(t *testing.T) {
		send(3)
		w := f.open("a")
		slices.Sort(w.ThreadIDs)
		slices.Sort(first.ThreadIDs)
		if w.Count != wake.MaxThreads+8 || !slices.Equal(w.ThreadIDs, first.ThreadIDs) || unnamed() != 8 {
			t.Fatalf("count %d, %d threads named (the same as before: %v), %d counted unnamed", w.Count, len(w.ThreadIDs), slices.Equal(w.ThreadIDs, first.ThreadIDs), unnamed())
		}
	})
	t.Run("the pager gets the bound's ids", func(t *testing.T) {
		if got := f.next("a"); got == nil || got.Count != wake.MaxThreads+8 || len(got.ThreadIDs) != wake.MaxThreads {
			t.Fatalf("claimed: %+v", got)
		}
	})
}

// TestConcurrentSendersOneWake: 32 senders queueing wakes for one part at once, each in
// its own transaction, leave exactly one pending wake carrying all 32 messages (per
// thread and in total), and its pager gets that one wake. Queueing only inserts, so none
// of them waits on another's row lock.
func TestConcurrentSendersOneWake(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const senders = 32
	threads := []uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.msg("a")
			r.ProjectID, r.HostOrgID = f.project, f.host[f.project]
			r.ThreadID = threads[i%2]
			r.Urgent = i == 7
			errs <- f.d.InTenant(f.ctx, pg.Tenant{ProjectID: f.project}, func(tx *pg.Tx) error {
				return f.svc.Queue(f.ctx, tx, r)
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var perThread map[string]int
	f.op(func(tx *pg.Tx) error {
		if _, err := f.svc.Coalesce(f.ctx, f.clock.Now(), false); err != nil {
			return err
		}
		return tx.QueryRow(f.ctx, `SELECT thread_counts FROM wake WHERE member_id = $1 AND status = 'pending'`, f.member["a"]).Scan(&perThread)
	})
	w := f.open("a")
	if w.Count != senders || !w.Urgent || len(f.wakes("a")) != 1 {
		t.Fatalf("want one pending urgent wake with count %d, have %+v", senders, f.wakes("a"))
	}
	if perThread[threads[0].String()] != senders/2 || perThread[threads[1].String()] != senders/2 {
		t.Fatalf("per-thread counts: %v", perThread)
	}
	got := f.next("a")
	if got == nil || got.Count != senders || got.ID != w.ID {
		t.Fatalf("claimed: %+v, want the pending wake %+v", got, w)
	}
	if again := f.next("a"); again != nil {
		t.Fatalf("a second wake: %+v", again)
	}
}

// TestQueueDoesNotWaitForOtherSenders: while one sender's transaction that queued a
// part's wake is still open, another sender queues a wake for the same part without
// waiting for it (a lock wait would run into the lock_timeout and fail the send).
func TestQueueDoesNotWaitForOtherSenders(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tenant := pg.Tenant{ProjectID: f.project}
	held, release, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first <- f.d.InTenant(f.ctx, tenant, func(tx *pg.Tx) error {
			r := f.msg("a")
			r.ProjectID = f.project
			if err := f.svc.Queue(f.ctx, tx, r); err != nil {
				close(held)
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	err := f.d.InTenant(f.ctx, tenant, func(tx *pg.Tx) error {
		if _, err := tx.Exec(f.ctx, "SET LOCAL lock_timeout = '2s'"); err != nil {
			return err
		}
		r := f.msg("a")
		r.ProjectID = f.project
		return f.svc.Queue(f.ctx, tx, r)
	})
	close(release)
	if ferr := <-first; ferr != nil {
		t.Fatal(ferr)
	}
	if err != nil {
		t.Fatalf("the second sender waited for the first one's uncommitted wake: %v", err)
	}
	if w := f.open("a"); w.Count != 2 {
		t.Fatalf("both messages in one pending wake: %+v", w)
	}
}

// TestOnlineNotWoken: a part seen within the last minute is online and not woken.
// TestOnlinePartsWakeIsHeldNotLost: a part seen within the online window is not nudged
// while it stays online, but its wake is kept and goes out once it has been quiet for the
// window (a message sent 36 s after a part's last call used to be dropped for good).
func TestOnlinePartsWakeIsHeldNotLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	f.seen("a", now.Add(-30*time.Second))
	f.seen("b", now.Add(-2*time.Minute))
	r := f.msg("a", "b")
	r.Urgent = true
	f.queue(r)
	// (The fixture's helpers fail the test itself, so the steps run in sequence.)
	if w := f.next("b"); w == nil || w.Count != 1 {
		t.Fatalf("an offline part is woken at once: %+v", w)
	}
	if w := f.next("a"); w != nil {
		t.Fatalf("an online part was nudged: %+v", w)
	}
	if w := f.open("a"); w.Count != 1 || !w.Urgent {
		t.Fatalf("an online part's wake is held, not dropped: %+v", w)
	}
	f.clock.Add(wake.DefaultOnlineWindow)
	if w := f.next("a"); w == nil || w.Count != 1 {
		t.Fatalf("the held wake goes out once the part has been quiet for the window: %+v", w)
	}
}

// TestCloseCancels: closing a thread takes its share out of pending wakes and cancels
// those left with nothing, including one claimed but not yet acknowledged.
func TestCloseCancels(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t1, t2 := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	q := func(thread uuid.UUID, parts ...string) {
		r := f.msg(parts...)
		r.ThreadID = thread
		f.queue(r)
	}
	q(t1, "a", "b", "c")
	q(t1, "a")
	q(t2, "a")
	claimed := f.next("c")
	if claimed == nil {
		t.Fatal("c has no wake")
	}
	f.wakes("a") // every event folded into its pending wake: the close takes shares out
	q(t1, "a")   // and one not folded yet: the close deletes it
	closeThread := func(thread uuid.UUID) {
		t.Helper()
		if err := f.d.InTenant(f.ctx, pg.Tenant{ProjectID: f.project}, func(tx *pg.Tx) error {
			return f.svc.CancelThread(f.ctx, tx, f.project, thread)
		}); err != nil {
			t.Fatal(err)
		}
	}
	closeThread(t1)
	if w := f.open("a"); w.Count != 1 || !slices.Equal(w.ThreadIDs, []string{t2.String()}) {
		t.Fatalf("a keeps t2's share only: %+v", w)
	}
	if ws := f.wakes("b"); len(ws) != 1 || ws[0].Status != wake.StatusCanceled {
		t.Fatalf("b's wake was only for t1: %+v", ws)
	}
	if ws := f.wakes("c"); len(ws) != 1 || ws[0].Status != wake.StatusCanceled {
		t.Fatalf("c's claimed wake was only for t1: %+v", ws)
	}
	if got := f.next("b"); got != nil {
		t.Fatalf("a canceled wake was handed out: %+v", got)
	}
	// The pager acknowledging the canceled wake is told so, not refused.
	if st, err := f.svc.Ack(f.ctx, f.agent["c"], claimed.ID); err != nil || st != wake.StatusCanceled {
		t.Fatalf("ack of a canceled wake: %q %v", st, err)
	}
	// A lease running out does not replay it either.
	f.clock.Add(wake.DefaultLease + time.Second)
	if got := f.next("c"); got != nil {
		t.Fatalf("canceled wake replayed: %+v", got)
	}
	// A thread closed before its only events were folded leaves no wake at all.
	t3 := uuid.Must(uuid.NewV7())
	q(t3, "bot")
	closeThread(t3)
	f.none("bot")
}

// TestTenantIsolation: a transaction of another project cannot queue wakes for this
// project's parts (RLS), and one agent cannot claim or acknowledge another's wakes.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.msg("a")
	r.ProjectID = f.project
	if err := f.d.InTenant(f.ctx, pg.Tenant{ProjectID: f.other}, func(tx *pg.Tx) error {
		return f.svc.Queue(f.ctx, tx, r)
	}); err != nil {
		t.Fatal(err)
	}
	f.none("a")
	f.queue(f.msg("a"))
	if got := f.next("peter"); got != nil {
		t.Fatalf("another agent claimed a's wake: %+v", got)
	}
	got := f.next("a")
	if got == nil {
		t.Fatal("a's wake")
	}
	if _, err := f.svc.Ack(f.ctx, f.agent["peter"], got.ID); err == nil {
		t.Fatal("another agent acknowledged a's wake")
	}
}

// TestLeaseReplay: a claimed wake not acknowledged is handed out again after its lease;
// an acknowledged one never is.
func TestLeaseReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.queue(f.msg("a"))
	first := f.next("a")
	if first == nil || first.Attempt != 1 {
		t.Fatalf("claim: %+v", first)
	}
	if again := f.next("a"); again != nil {
		t.Fatalf("a leased wake was handed out twice: %+v", again)
	}
	f.clock.Add(wake.DefaultLease + time.Second)
	replay := f.next("a")
	if replay == nil || replay.ID != first.ID || replay.Attempt != 2 {
		t.Fatalf("replay after the lease: %+v", replay)
	}
	for i := 0; i < 2; i++ { // acknowledging twice is fine
		if st, err := f.svc.Ack(f.ctx, f.agent["a"], replay.ID); err != nil || st != wake.StatusDelivered {
			t.Fatalf("ack: %q %v", st, err)
		}
	}
	f.clock.Add(wake.DefaultLease + time.Second)
	if got := f.next("a"); got != nil {
		t.Fatalf("an acknowledged wake came back: %+v", got)
	}
}

// TestCleanup: delivered and canceled wakes older than the cut are deleted; pending ones
// and dead letters stay.
func TestCleanup(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.queue(f.msg("a", "b", "c"))
	f.deliver("a")
	f.exec(`UPDATE wake SET status = 'dead' WHERE member_id = $1`, f.member["c"])
	n, err := f.svc.Cleanup(f.ctx, f.clock.Now().Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("cleanup deleted %d (%v), want 1", n, err)
	}
	f.none("a")
	if len(f.wakes("b")) != 1 || len(f.wakes("c")) != 1 {
		t.Fatalf("pending or dead wakes were deleted: %+v %+v", f.wakes("b"), f.wakes("c"))
	}
}
