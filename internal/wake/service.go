package wake

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/waiters"
)

// Defaults of the Service's knobs.
const (
	DefaultOnlineWindow = time.Minute
	DefaultLease        = 5 * time.Minute
	DefaultMaxAttempts  = 8
	DefaultSweepEvery   = 30 * time.Second
	// notifyChannel carries comma-separated agent ids ("*": everyone) of wakes made ready.
	notifyChannel = "rr_wake"
)

// Wake statuses (the wake table's).
const (
	StatusPending   = "pending"
	StatusClaimed   = "claimed"
	StatusSending   = "sending"
	StatusDelivered = "delivered"
	StatusCanceled  = "canceled"
	StatusDead      = "dead"
)

// Statuses are a wake's statuses, in the order it goes through them.
func Statuses() []string {
	return []string{StatusPending, StatusClaimed, StatusSending, StatusDelivered, StatusCanceled, StatusDead}
}

// MaxList is the most wakes List answers at once.
const MaxList = 10000

// Deps are what the wake service is built from (New). Zero knobs take the defaults above.
type Deps struct {
	DB  *pg.DB
	Q   *db.Queries
	Log *slog.Logger
	// Now is the clock (tests inject one); the sweep takes its time as an argument.
	Now func() time.Time
	// Box seals and opens webhook secrets (RELAYROOM_SECRET_KEY); nil means webhooks
	// can be neither configured nor sent.
	Box *SecretBox

	OnlineWindow time.Duration // a part seen this recently is online: not woken
	Lease        time.Duration // how long a pager's claim holds before the wake is replayed
	MaxAttempts  int           // webhook attempts before the wake is dead
	// DispatchProjects is the page of projects one dispatch batch looks at (default 5,000).
	DispatchProjects int
	// MaxDeliveriesPerOrg bounds one organisation's webhook posts in flight in a process
	// (default DefaultMaxDeliveriesPerOrg).
	MaxDeliveriesPerOrg int
	PollInterval        time.Duration // long-poll re-check besides notifications (default 30 s: each sweep tick notifies anyway)
	HTTPClient          *http.Client  // webhook client (default: 10 s timeout, public addresses only unless PrivateTargets)
	// PrivateTargets lets webhooks reach loopback and private addresses
	// (RELAYROOM_WEBHOOK_PRIVATE_TARGETS: local development, or a server whose
	// organisations all trust each other). Off, an organisation's admin cannot make the
	// server post into its own machine or network.
	PrivateTargets bool
}

// Service queues, holds, releases and delivers wakes. Build it with New.
type Service struct {
	Deps
	// Jobs delivers webhooks (set by RegisterJobs); nil means wakes are only delivered
	// to pagers.
	Jobs *jobs.Runner

	once     sync.Once
	hub      *hub
	kick     chan struct{}
	notes    chan memberRef // parts whose wakes were queued and committed: to NOTIFY
	overflow atomic.Bool    // notes was full: the next NOTIFY says "*"
	stopped  chan struct{}  // closed by EndPolls or when Run returns: long polls end at once
	stopOnce sync.Once

	clientOnce sync.Once
	client     *http.Client // webhookClient's, when HTTPClient is nil

	dispatchMu    sync.Mutex
	dispatchAfter uuid.UUID // the dispatch's place in the projects with webhook wakes

	deliveries waiters.Slots[uuid.UUID] // webhook posts in flight in this process, by organisation
	polls      waiters.Slots[uuid.UUID] // long polls waiting in this process, by agent (MaxPollsPerAgent)
}

// New builds the service; a nil Q is the generated queries.
func New(d Deps) *Service {
	if d.Q == nil {
		d.Q = db.New()
	}
	s := &Service{Deps: d}
	s.init()
	return s
}

func (s *Service) init() {
	s.once.Do(func() {
		s.hub = &hub{}
		s.kick = make(chan struct{}, 1)
		s.notes = make(chan memberRef, notifyBuffer)
		s.stopped = make(chan struct{})
		if s.Log == nil {
			s.Log = slog.Default()
		}
	})
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) onlineWindow() time.Duration { return cmpOr(s.OnlineWindow, DefaultOnlineWindow) }
func (s *Service) lease() time.Duration        { return cmpOr(s.Lease, DefaultLease) }
func (s *Service) pollInterval() time.Duration { return cmpOr(s.PollInterval, 30*time.Second) }
func (s *Service) maxAttempts() int {
	if s.MaxAttempts > 0 {
		return s.MaxAttempts
	}
	return DefaultMaxAttempts
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Queue records the wakes r asks for, in tx: the transaction that stored the work, whose
// tenant is r.ProjectID. It is one statement that only inserts (one wake event per part),
// sent with the caller's other pipelined writes: concurrent senders to one part do not
// wait on each other. An online part's wake is queued too but held until the part has
// been quiet for the online window (it may be seen to by then: acks and a close withdraw
// what they cover). The events are coalesced into the
// part's one pending wake when it is about to be delivered (fold), and whether that
// wake may be delivered (parked? budget left? urgent?) is decided then too, so a parked
// part's wake simply waits, uncharged.
func (s *Service) Queue(ctx context.Context, tx *pg.Tx, r Request) error {
	s.init()
	members := dedupe(r.MemberIDs)
	if len(members) == 0 {
		return nil
	}
	if r.Source == "" {
		r.Source = "message"
	}
	now := r.At
	if now.IsZero() {
		now = s.now()
	}
	if r.HostOrgID == uuid.Nil {
		return fmt.Errorf("wake queue: the request names no host organisation")
	}
	arg := db.WakeEventQueueParams{ProjectID: r.ProjectID, HostOrgID: r.HostOrgID, MemberIds: members, Ids: make([]uuid.UUID, len(members)),
		Urgent: r.Urgent, Source: r.Source, Now: now}
	for i := range arg.Ids {
		arg.Ids[i] = uuid.Must(uuid.NewV7())
	}
	if r.ThreadID != uuid.Nil {
		arg.ThreadID = &r.ThreadID
	}
	if r.ItemID != uuid.Nil {
		arg.ItemID = &r.ItemID
	}
	if err := s.Q.WakeEventQueue(ctx, tx, arg); err != nil {
		return fmt.Errorf("wake queue: %w", err)
	}
	tx.AfterCommit(func() { s.noteQueued(r.ProjectID, members) })
	return nil
}

// memberRef names a part whose wake events were committed.
type memberRef struct{ project, member uuid.UUID }

// notifyBuffer bounds the parts waiting for the notifier; past it, the next NOTIFY tells
// every listener to look ("*") rather than block a request.
const notifyBuffer = 4096

// noteQueued hands committed wakes to the notifier (Run's notifyLoop) without blocking.
func (s *Service) noteQueued(project uuid.UUID, members []uuid.UUID) {
	for _, m := range members {
		select {
		case s.notes <- memberRef{project, m}:
		default:
			s.overflow.Store(true)
		}
	}
}

// notifyLoop tells every replica's listener (NOTIFY rr_wake) which agents got wakes,
// outside the senders' transactions: a NOTIFY inside one takes Postgres' notify lock
// from its pre-commit to the end of its commit, so every notifying commit in the cluster
// would wait for the previous one. Here one NOTIFY covers all the parts noted while the
// previous one was sent: batches grow with the load. A wake whose note is lost (the
// process ended right after the commit) is found by the pager's next poll or the next
// sweep tick, which notifies everyone.
func (s *Service) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			// The last writes of a drain still get their NOTIFY, bounded: what cannot be
			// sent is left to the sweep.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyFlushTimeout)
			s.sendNotes(fctx, s.takeNotes(nil))
			cancel()
			return
		case first := <-s.notes:
			s.sendNotes(ctx, s.takeNotes(&first))
		}
	}
}

// notifyFlushTimeout bounds the last NOTIFY of a process that stops.
const notifyFlushTimeout = 2 * time.Second

// takeNotes gathers first (when given) and the notes queued behind it, up to notifyBuffer.
func (s *Service) takeNotes(first *memberRef) db.WakeNotifyMembersParams {
	var arg db.WakeNotifyMembersParams
	if first != nil {
		arg.ProjectIds, arg.MemberIds = []uuid.UUID{first.project}, []uuid.UUID{first.member}
	}
	for len(arg.MemberIds) < notifyBuffer {
		select {
		case n := <-s.notes:
			arg.ProjectIds, arg.MemberIds = append(arg.ProjectIds, n.project), append(arg.MemberIds, n.member)
		default:
			return arg
		}
	}
	return arg
}

// sendNotes sends the NOTIFY of the parts in arg, or of every part once notes overflowed.
func (s *Service) sendNotes(ctx context.Context, arg db.WakeNotifyMembersParams) {
	if len(arg.MemberIds) == 0 && !s.overflow.Load() {
		return
	}
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		if s.overflow.Swap(false) {
			return s.Q.WakeNotify(ctx, tx, "*")
		}
		return s.Q.WakeNotifyMembers(ctx, tx, arg)
	})
	if err != nil && ctx.Err() == nil {
		s.Log.WarnContext(ctx, "wake notify", "error", err.Error())
	}
}

// Withdraw takes an acked message out of its part's wakes not delivered yet, in the ack's
// transaction (tx's tenant is projectID): the message's event goes, and the pending
// wake's share for its thread is recounted from what is still unread; a wake left with
// nothing is canceled, so a part that read its messages is not nudged about them.
func (s *Service) Withdraw(ctx context.Context, tx *pg.Tx, projectID, memberID, threadID, messageID uuid.UUID) error {
	// Three statements, one round trip: the server runs them in turn, so the recount's
	// snapshot is taken once the wake's lock is held (WakeLockPending).
	err := tx.Pipeline(func() error {
		if err := s.Q.WakeEventWithdraw(ctx, tx, db.WakeEventWithdrawParams{ProjectID: projectID, MemberID: memberID, MessageID: messageID}); err != nil {
			return err
		}
		if err := s.Q.WakeLockPending(ctx, tx, db.WakeLockPendingParams{ProjectID: projectID, MemberID: memberID}); err != nil {
			return err
		}
		return s.Q.WakeWithdrawAcked(ctx, tx, db.WakeWithdrawAckedParams{ProjectID: projectID, MemberID: memberID,
			ThreadID: threadID, ThreadKey: threadID.String(), Now: s.now()})
	})
	if err != nil {
		return fmt.Errorf("wake withdraw: %w", err)
	}
	return nil
}

// CancelThread takes a closed thread out of every undelivered wake of the project: its
// events not folded yet are deleted, its share of the wakes they were folded into is
// taken out, and a wake that carried nothing else is canceled. Runs in the closing
// transaction.
func (s *Service) CancelThread(ctx context.Context, tx *pg.Tx, projectID, threadID uuid.UUID) error {
	err := tx.Pipeline(func() error {
		// The delete travels with the update: one round trip.
		return s.Q.WakeEventCancelThread(ctx, tx, db.WakeEventCancelThreadParams{ProjectID: projectID, ThreadID: &threadID})
	})
	if err == nil {
		_, err = s.Q.WakeCancelThread(ctx, tx, db.WakeCancelThreadParams{ProjectID: projectID, ThreadID: threadID, Now: s.now()})
	}
	if err != nil {
		return fmt.Errorf("wake cancel thread: %w", err)
	}
	return nil
}

// MaxThreads bounds the threads one wake names (threadIds): those it names first, then
// those with the most events. The other threads' events are counted with the events of no
// thread (other_count). One part's sends to another that is offline or past its budget
// grew one wake without end: every fold rebuilt it (half a second at 100,000 threads),
// the pager's answer and a webhook's body carried every id (3.9 MB), and the pager's
// RELAYROOM_THREAD_IDS passed what one environment variable may hold (128 KiB), so its
// command could not start. 100 ids are 3.7 KB.
const MaxThreads = 100

// foldBatch bounds the events one fold statement coalesces, and the events one
// transaction of Coalesce folds before it commits, so each stays well within the
// statement timeout; foldProjects bounds the projects one transaction looks at, and
// foldBatches the transactions of one Coalesce, so a sweep tick under a flood of sends
// still ends (the next tick takes the rest).
const (
	foldBatch    = 5000
	foldProjects = 1000
	foldBatches  = 20
)

// Coalesce folds wake events into their parts' pending wakes (every agent's, or only
// those of agents with a webhook), as the sweep and the webhook dispatch do before
// delivering; a pager's claim folds its own agent's events itself. It lists the projects
// with events first (a read of every shard, without locks), then folds each project's
// by itself: on Citus each fold is a router statement. It returns how many events it
// folded.
func (s *Service) Coalesce(ctx context.Context, now time.Time, webhookOnly bool) (int64, error) {
	var total int64
	for range foldBatches {
		var n int64
		more := false
		err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
			n, more = 0, false
			arg := db.WakeEventListBacklogParams{WebhookOnly: webhookOnly, MaxRows: foldProjects}
			if webhookOnly {
				agents, err := s.Q.WakeListWebhookAgents(ctx, tx)
				if err != nil || len(agents) == 0 {
					return err
				}
				arg.WebhookAgents = agents
			}
			backlog, err := s.Q.WakeEventListBacklog(ctx, tx, arg)
			if err != nil {
				return err
			}
			more = len(backlog) == foldProjects
			for _, b := range backlog {
				k, err := s.Q.WakeEventFold(ctx, tx, db.WakeEventFoldParams{Now: now, ProjectID: b.ProjectID, AgentIds: b.AgentIds, MaxRows: foldBatch, MaxThreads: MaxThreads})
				if err != nil {
					return err
				}
				n += k
				if k == foldBatch || n >= foldBatch {
					more = true
					break
				}
			}
			return nil
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("wake coalesce: %w", err)
		}
		if !more {
			break
		}
	}
	return total, nil
}

func dedupe(ids []uuid.UUID) []uuid.UUID {
	out := slices.Clone(ids)
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].String(), out[j].String()) < 0 })
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(id uuid.UUID) bool { return id == uuid.Nil })
}

// SweepResult says what one tick did.
type SweepResult struct {
	Resumed    int64 `json:"resumed"`
	Folded     int64 `json:"folded"`
	Rescued    int   `json:"rescued"` // lost webhook deliveries put back to pending
	Dispatched int   `json:"dispatched"`
}

// Sweep is one tick of the 30 s eligibility sweep at time now: it folds every wake event
// into its part's pending wake (so events of agents with neither pager nor webhook do not
// pile up), unparks every part whose park ended (the first tick past resetAt), tells every waiting pager to look again
// (wakes of resumed parts, and wakes whose part's budget freed, are deliverable now), puts
// back webhook wakes whose delivery was lost (rescueSending), and hands deliverable webhook
// wakes to delivery jobs. Pending wakes themselves are not
// rewritten: deliverability is decided at delivery, so a tick costs the same with 100 or
// 100,000 of them.
func (s *Service) Sweep(ctx context.Context, now time.Time) (SweepResult, error) {
	s.init()
	var res SweepResult
	var err error
	if res.Folded, err = s.Coalesce(ctx, now, false); err != nil {
		return res, fmt.Errorf("wake sweep: %w", err)
	}
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		n, err := s.Q.MembershipResumeParked(ctx, tx, now)
		if err != nil {
			return fmt.Errorf("resume parked: %w", err)
		}
		res.Resumed = n
		return s.Q.WakeNotify(ctx, tx, "*")
	})
	if err != nil {
		return res, fmt.Errorf("wake sweep: %w", err)
	}
	if res.Rescued, err = s.rescueSending(ctx, now); err != nil {
		return res, fmt.Errorf("wake sweep: %w", err)
	}
	if res.Dispatched, err = s.Dispatch(ctx, now); err != nil {
		return res, err
	}
	return res, nil
}

// Periodic is the sweep as a periodic job (every 30 s, once across replicas), plus the
// hourly clean-up of delivered and canceled wakes older than a week (in batches, within
// the default periodic timeout; a run cut short leaves the rest to the next hour).
func (s *Service) Periodic() []jobs.Periodic {
	return []jobs.Periodic{
		{Name: "wake_sweep", Every: DefaultSweepEvery, RunOnStart: true, Run: func(ctx context.Context) error {
			res, err := s.Sweep(ctx, s.now())
			if err == nil && (res.Resumed > 0 || res.Rescued > 0 || res.Dispatched > 0) {
				s.Log.InfoContext(ctx, "wake sweep", "resumed", res.Resumed, "folded", res.Folded, "rescued", res.Rescued, "dispatched", res.Dispatched)
			}
			return err
		}},
		{Name: "wake_cleanup", Every: time.Hour, RunOnStart: true, Run: func(ctx context.Context) error {
			_, err := s.Cleanup(ctx, s.now().Add(-7*24*time.Hour))
			return err
		}},
	}
}

// CleanupBatch bounds the wakes one clean-up statement deletes (each within the
// statement timeout).
const CleanupBatch = 5000

// Cleanup deletes delivered and canceled wakes last changed before before, in batches;
// dead letters stay for people to see.
func (s *Service) Cleanup(ctx context.Context, before time.Time) (int64, error) {
	return s.DB.OperatorBatches(ctx, "wake cleanup", CleanupBatch, func(tx *pg.Tx) (int64, error) {
		return s.Q.WakeDeleteOld(ctx, tx, db.WakeDeleteOldParams{Before: before, MaxRows: CleanupBatch})
	})
}

// Run listens for wake notifications (to answer long polls and dispatch webhooks at once)
// until ctx ends; then every long poll waiting in this process returns (so a graceful
// shutdown is not held up by them). Without Run, pagers still get their wakes, at the
// poll interval.
func (s *Service) Run(ctx context.Context) {
	s.init()
	defer s.EndPolls()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.notifyLoop(ctx) }()
	go func() { defer wg.Done(); s.listen(ctx) }()
	go func() { defer wg.Done(); s.dispatchLoop(ctx) }()
	wg.Wait()
}

// EndPolls ends this process's long polls now (each answers "no wake", and its pager
// asks again, another replica then) while Run goes on: a replica shutting down ends its
// polls at once, so that they do not hold its drain, and keeps sending the NOTIFYs of the
// writes it is finishing, which other replicas' pagers wait for.
func (s *Service) EndPolls() {
	s.init()
	s.stopOnce.Do(func() { close(s.stopped) })
}

// ListenerName ends the application_name of the wake listener's connection.
const ListenerName = "wake-listener"

// ListenState says whether the wake listener is listening now (waiters.State): while it
// is not, a long poll learns of a wake only at its own periodic check.
func (s *Service) ListenState() string {
	s.init()
	return s.hub.State()
}

func (s *Service) listen(ctx context.Context) {
	s.hub.Follow(ctx, s.Log, "wake listener", s.listenOnce)
}

func (s *Service) listenOnce(ctx context.Context, connected func()) error {
	// Session: behind a transaction pooler, a LISTEN needs a connection of its own.
	conn, err := s.DB.Session.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries a LISTEN: it never goes back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}()
	// Named in pg_stat_activity: an operator (and a test) tells the listener from the
	// pool's other connections, whose last statement it shares once it pings.
	if _, err := conn.Exec(ctx, "SELECT set_config('application_name', left(current_setting('application_name') || ' "+ListenerName+"', 63), false)"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	connected()
	for {
		n, err := pg.AwaitNotification(ctx, conn.Conn(), pg.ListenPing, pg.ListenPingTimeout)
		if err != nil {
			return err
		}
		s.hub.notify(n.Payload)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Service) dispatchLoop(ctx context.Context) {
	if s.Jobs == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		if _, err := s.Dispatch(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.Log.WarnContext(ctx, "wake dispatch", "error", err.Error())
		}
	}
}

// hub hands notifications to the long polls waiting in this process, by agent.
type hub struct {
	waiters.Set[uuid.UUID]
}

// notify wakes the agents a notification's payload names (comma-separated ids), or every
// waiter for "*".
func (h *hub) notify(payload string) {
	if payload == "*" {
		h.WakeAll()
		return
	}
	for _, s := range strings.Split(payload, ",") {
		if id, err := uuid.Parse(s); err == nil {
			h.Wake(id)
		}
	}
}

// Wake is what a pager's command and a webhook receive.
type Wake struct {
	ID         uuid.UUID  `json:"id"`
	ProjectID  uuid.UUID  `json:"projectId"`
	Project    string     `json:"project,omitempty"`
	Part       string     `json:"part"`
	Agent      string     `json:"agent,omitempty"`
	Count      int        `json:"count"`
	Sources    []string   `json:"sources"`
	ThreadIDs  []string   `json:"threadIds"`
	Urgent     bool       `json:"urgent"`
	LastItemID *uuid.UUID `json:"lastItemId,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	Attempt    int        `json:"attempt"`
	LeaseUntil *time.Time `json:"leaseUntil,omitempty"`
}

func threadIDs(raw json.RawMessage) []string {
	m := map[string]int{}
	_ = json.Unmarshal(raw, &m) // written by our own SQL as an object of counts
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
