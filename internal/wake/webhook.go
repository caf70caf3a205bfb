package wake

import (
	"bytes"
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/egress"
	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/pg"
)

// Webhook headers.
const (
	HeaderSignature = "Relayroom-Signature" // t=<unix seconds>,v1=<hex HMAC-SHA256>
	HeaderTimestamp = "Relayroom-Timestamp"
	HeaderWakeID    = "Relayroom-Wake-Id"
	SecretPrefix    = "whsec_"
)

// Sign returns the signature header value of body at time t: HMAC-SHA256 keyed with the
// whole secret (prefix included) over "<unix seconds>.<body>".
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header against body, refusing timestamps further than
// tolerance from now (replays). It is what a receiver does; docs/wakes.md has it in Go.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("signature timestamp outside tolerance")
	}
	want := Sign(secret, time.Unix(sec, 0), body)
	if !hmac.Equal([]byte(want), []byte("t="+ts+",v1="+sig)) {
		return errors.New("signature mismatch")
	}
	return nil
}

// SecretBox seals webhook secrets with AES-256-GCM under the server key.
type SecretBox struct{ aead cipher.AEAD }

// OptionalSecretBox is NewSecretBox for a key that may be unset: nil (webhooks off)
// when key is "". The server and the admin commands open the key the same way.
func OptionalSecretBox(key string) (*SecretBox, error) {
	if key == "" {
		return nil, nil
	}
	return NewSecretBox(key)
}

// NewSecretBox takes the server key: 32 bytes as 64 hex digits or base64 (RELAYROOM_SECRET_KEY).
func NewSecretBox(key string) (*SecretBox, error) {
	key = strings.TrimSpace(key)
	var raw []byte
	if b, err := hex.DecodeString(key); err == nil && len(b) == 32 {
		raw = b
	} else if b, err := base64.StdEncoding.DecodeString(key); err == nil && len(b) == 32 {
		raw = b
	} else if b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(key, "=")); err == nil && len(b) == 32 {
		raw = b
	} else {
		return nil, errors.New("must be 32 bytes, as 64 hex digits or base64 (openssl rand -hex 32)")
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &SecretBox{aead: aead}, nil
}

// Seal encrypts; the nonce leads the result. ad binds the ciphertext to its row.
func (b *SecretBox) Seal(plain, ad []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand does not fail on Linux
	return b.aead.Seal(nonce, nonce, plain, ad)
}

// Open decrypts what Seal made.
func (b *SecretBox) Open(sealed, ad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed secret too short")
	}
	return b.aead.Open(nil, sealed[:n], sealed[n:], ad)
}

// Target is an agent's webhook as people see it (never its secret).
type Target struct {
	Agent     string    `json:"agent"`
	URL       string    `json:"url"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Refusals of a webhook URL.
const (
	MsgWebhookHTTPS   = "the webhook URL must be an absolute https:// URL"
	MsgWebhookPrivate = "the webhook URL must name a public address: this server does not post to loopback or private networks"
)

// MaxWebhookURLBytes bounds a webhook's URL: it is stored, shown and audited.
const MaxWebhookURLBytes = 2048

// validateURL accepts https URLs to public hosts; with PrivateTargets, also any https
// host and http to a loopback one (local development). A name is checked again when it is
// dialled (after resolution): this only answers early for an address written as such.
func (s *Service) validateURL(raw string) error {
	if len(raw) > MaxWebhookURLBytes {
		return apperr.New(apperr.Invalid, "the webhook URL is longer than %d characters", MaxWebhookURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return apperr.New(apperr.Invalid, "%s", MsgWebhookHTTPS)
	}
	h := u.Hostname()
	ip := net.ParseIP(h)
	loopback := h == "localhost" || (ip != nil && ip.IsLoopback())
	switch {
	case !s.PrivateTargets && (loopback || (ip != nil && egress.Blocked(ip))):
		return apperr.New(apperr.Invalid, "%s", MsgWebhookPrivate)
	case u.Scheme == "http" && !(s.PrivateTargets && loopback):
		return apperr.New(apperr.Invalid, "%s", MsgWebhookHTTPS)
	}
	return nil
}

// webhookClient is the client webhooks are posted with: HTTPClient, or one that gives up
// after 10 s and, unless PrivateTargets, dials public addresses only. It is built once,
// on the first delivery, so that its connections are reused.
func (s *Service) webhookClient() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	s.clientOnce.Do(func() {
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		t := &http.Transport{DialContext: dialer.DialContext, Proxy: http.ProxyFromEnvironment}
		if !s.PrivateTargets {
			// Public addresses only, checked on the address dialled, or, through the
			// environment's proxy, on the webhook's own name before it is handed over.
			t = egress.Transport(dialer, http.ProxyFromEnvironment, "webhook")
		}
		t.TLSHandshakeTimeout, t.ResponseHeaderTimeout = 10*time.Second, 10*time.Second
		t.MaxIdleConnsPerHost, t.IdleConnTimeout = 4, 90*time.Second
		s.client = &http.Client{Timeout: 10 * time.Second, Transport: t}
	})
	return s.client
}

func splitRef(ref string) (string, string, error) {
	org, slug, ok := strings.Cut(ref, "/")
	if !ok || org == "" || slug == "" {
		return "", "", apperr.New(apperr.Invalid, "agent must be written org/slug, got %q", ref)
	}
	return org, slug, nil
}

// SetWebhook gives an agent a webhook target and a new secret, returned once (only its
// ciphertext is stored). Setting it again replaces both.
func (s *Service) SetWebhook(ctx context.Context, agentRef, rawURL string) (Target, string, error) {
	if s.Box == nil {
		return Target{}, "", apperr.New(apperr.Invalid, "RELAYROOM_SECRET_KEY is not set: webhook secrets cannot be stored (generate one: openssl rand -hex 32)")
	}
	if err := s.validateURL(rawURL); err != nil {
		return Target{}, "", err
	}
	org, slug, err := splitRef(agentRef)
	if err != nil {
		return Target{}, "", err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	secret := SecretPrefix + base64.RawURLEncoding.EncodeToString(b)
	var t Target
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		a, err := s.agentByRef(ctx, tx, agentRef, org, slug)
		if err != nil {
			return err
		}
		if err := s.Q.WakeTargetUpsert(ctx, tx, db.WakeTargetUpsertParams{OrgID: a.OrgID, AgentID: a.ID, Url: rawURL,
			SecretEnc: s.Box.Seal([]byte(secret), a.ID[:])}); err != nil {
			return err
		}
		// The dashboard's change is audited with it (docs/dashboard.md, Audit).
		if err := audit.RecordIntended(ctx, tx); err != nil {
			return err
		}
		now := s.now()
		t = Target{Agent: agentRef, URL: rawURL, CreatedAt: now, UpdatedAt: now}
		return nil
	})
	if err != nil {
		return Target{}, "", pg.Classify("wake set webhook", err)
	}
	return t, secret, nil
}

// agentByRef finds the agent an operator's webhook command names (org/slug, split by
// the caller before the transaction); NotFound when there is none.
func (s *Service) agentByRef(ctx context.Context, tx *pg.Tx, agentRef, org, slug string) (db.AgentGetByRefRow, error) {
	a, err := s.Q.AgentGetByRef(ctx, tx, db.AgentGetByRefParams{OrgSlug: org, AgentSlug: slug})
	if pg.IsNoRows(err) {
		return a, apperr.New(apperr.NotFound, "no agent %s", agentRef)
	}
	return a, err
}

// ClearWebhook removes an agent's webhook: its wakes go to pagers again.
func (s *Service) ClearWebhook(ctx context.Context, agentRef string) (bool, error) {
	org, slug, err := splitRef(agentRef)
	if err != nil {
		return false, err
	}
	var n int64
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		a, err := s.agentByRef(ctx, tx, agentRef, org, slug)
		if err != nil {
			return err
		}
		if n, err = s.Q.WakeTargetDelete(ctx, tx, db.WakeTargetDeleteParams{OrgID: a.OrgID, AgentID: a.ID}); err != nil || n == 0 {
			return err
		}
		return audit.RecordIntended(ctx, tx)
	})
	if err != nil {
		return false, pg.Classify("wake clear webhook", err)
	}
	return n > 0, nil
}

// Webhooks lists every agent's webhook target.
func (s *Service) Webhooks(ctx context.Context) ([]Target, error) {
	var out []Target
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := s.Q.WakeTargetList(ctx, tx)
		for _, r := range rows {
			out = append(out, Target{Agent: r.OrgSlug + "/" + r.AgentSlug, URL: r.Url, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
		}
		return err
	})
	if err != nil {
		return nil, pg.Classify("wake webhooks", err)
	}
	return out, nil
}

// Listed is a wake as people see it (admin list, dead letters).
type Listed struct {
	ID          uuid.UUID  `json:"id"`
	ProjectID   uuid.UUID  `json:"projectId"`
	Project     string     `json:"project"`
	Part        string     `json:"part"`
	Agent       string     `json:"agent"`
	Status      string     `json:"status"`
	Urgent      bool       `json:"urgent"`
	Sources     []string   `json:"sources"`
	Count       int        `json:"count"`
	Attempts    int        `json:"attempts"`
	LastError   *string    `json:"lastError"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	DeliveredAt *time.Time `json:"deliveredAt"`
}

// List returns wakes across projects, newest first; status "" means all. Wake events
// not folded yet are folded first, so pending wakes show every message queued so far.
func (s *Service) List(ctx context.Context, status string, limit int) ([]Listed, error) {
	// A misspelt status would list nothing, which reads as "no dead letters".
	if status != "" && !slices.Contains(Statuses(), status) {
		return nil, apperr.New(apperr.Invalid, "status must be one of %s, got %q", strings.Join(Statuses(), ", "), status)
	}
	if limit < 1 || limit > MaxList {
		return nil, apperr.New(apperr.Invalid, "limit must be 1 to %d, got %d", MaxList, limit)
	}
	if _, err := s.Coalesce(ctx, s.now(), false); err != nil {
		return nil, err
	}
	arg := db.WakeListParams{MaxRows: int32(limit)}
	if status != "" {
		arg.Status = &status
	}
	out := []Listed{}
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		rows, err := s.Q.WakeList(ctx, tx, arg)
		for _, r := range rows {
			out = append(out, Listed{ID: r.ID, ProjectID: r.ProjectID, Project: r.ProjectSlug, Part: r.Part,
				Agent: r.OrgSlug + "/" + r.AgentSlug, Status: r.Status, Urgent: r.Urgent, Sources: r.Sources,
				Count: int(r.Count), Attempts: int(r.Attempts), LastError: r.LastError, CreatedAt: r.CreatedAt,
				UpdatedAt: r.UpdatedAt, DeliveredAt: r.DeliveredAt})
		}
		return err
	})
	if err != nil {
		return nil, pg.Classify("wake list", err)
	}
	return out, nil
}

// Retry sends a dead letter again (the operator's `wake retry`): it becomes pending and is
// dispatched. It reports false, changing nothing, for a wake that is pending already (a
// retry done before); a wake that is neither is refused (Conflict), and an unknown id is
// NotFound.
func (s *Service) Retry(ctx context.Context, id uuid.UUID) (bool, error) {
	refused := apperr.New(apperr.Conflict, "wake %s is not a dead letter, its threads have all ended, or its part already has a pending wake", id)
	retried := false
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		retried = false // a transaction retried runs again from its start
		owner, err := s.Q.WakeGetOwner(ctx, tx, id)
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no wake %s", id)
		}
		if err != nil {
			return err
		}
		if onItsWay(owner.Status) {
			return nil // retried already: nothing to do, as a second revoke
		}
		n, err := s.Q.WakeRetryDead(ctx, tx, db.WakeRetryDeadParams{ProjectID: owner.ProjectID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			// A person's retry on the dashboard may have come between the read and the
			// write: then it is done, as when it came first.
			if now, err := s.Q.WakeGetOwner(ctx, tx, id); err == nil && onItsWay(now.Status) {
				return nil
			}
			return refused
		}
		retried = true
		// In the host's history, as a person's retry on the dashboard is.
		if err := audit.RecordOperator(ctx, tx, audit.Event{OrgID: owner.HostOrgID, ProjectID: owner.ProjectID, Kind: audit.KindWake,
			ObjectID: id.String(), Action: "retried"}); err != nil {
			return err
		}
		return s.Q.WakeNotify(ctx, tx, "*")
	})
	if pg.IsUniqueViolation(err) {
		// New work opened a pending wake for the part between the statement's check and
		// its write (a fold committed meanwhile): the same refusal as when it came first.
		return false, refused
	}
	return retried, pg.Classify("wake retry", err)
}

// onItsWay says a wake of that status needs no retry: pending, or already taken by a
// pager or the webhook dispatch, or delivered. A retry repeated at once finds the first
// one's wake already being posted (the dispatch is told at its commit), not pending.
func onItsWay(status string) bool {
	switch status {
	case StatusPending, StatusClaimed, StatusSending, StatusDelivered:
		return true
	}
	return false
}

// DeliverArgs is the webhook delivery job of one wake.
type DeliverArgs struct {
	ProjectID uuid.UUID `json:"projectId"`
	WakeID    uuid.UUID `json:"wakeId"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "wake_webhook" }

// RegisterJobs adds the webhook delivery worker and the sweep to the runner (before it
// starts). The service keeps the runner to enqueue deliveries.
func (s *Service) RegisterJobs(r *jobs.Runner) error {
	s.init()
	s.Jobs = r
	if err := jobs.AddWorker(r, &deliverWorker{s: s}); err != nil {
		return err
	}
	for _, p := range s.Periodic() {
		if err := r.AddPeriodic(p); err != nil {
			return err
		}
	}
	return nil
}

// Dispatch hands ready wakes of agents with a webhook to delivery jobs, enqueued in the
// transaction that marks them sending: a wake is never taken without its job.
func (s *Service) Dispatch(ctx context.Context, now time.Time) (int, error) {
	if s.Jobs == nil {
		return 0, nil
	}
	if _, err := s.Coalesce(ctx, now, true); err != nil {
		return 0, err
	}
	total := 0
	for pages := 0; total < dispatchPerCall && pages < dispatchPages; pages++ {
		n, more, err := s.dispatchBatch(ctx, now)
		total += n
		if err != nil || (n < dispatchBatchSize && !more) {
			return total, err
		}
	}
	return total, nil
}

// dispatchPerCall bounds the deliveries one dispatch enqueues; the next notification or
// sweep tick takes the rest. dispatchBatchSize bounds one transaction's takes, and
// dispatchProjects the projects with pending webhook wakes it looks at (a project whose
// wakes are all held, parked or over budget, still takes a slot of it).
const (
	dispatchPerCall   = 10000
	dispatchBatchSize = 500
	dispatchProjects  = 5000
	// dispatchPages bounds the pages of projects one dispatch reads: the next call goes
	// on from where it stopped (Service.dispatchAfter), then starts over.
	dispatchPages = 20
)

// dispatchBatch takes up to dispatchBatchSize deliverable webhook wakes, project by
// project (each take is a router statement on Citus) from the page of projects after
// the service's cursor, and enqueues their deliveries. more says projects after those
// looked at may hold wakes (the page was full, or the batch filled before its end).
func (s *Service) dispatchBatch(ctx context.Context, now time.Time) (n int, more bool, err error) {
	s.dispatchMu.Lock() // one dispatch at a time moves the cursor
	defer s.dispatchMu.Unlock()
	next := s.dispatchAfter
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		n, more, next = 0, false, s.dispatchAfter
		agents, err := s.Q.WakeListWebhookAgents(ctx, tx)
		if err != nil || len(agents) == 0 {
			return err
		}
		page := cmp.Or(s.DispatchProjects, dispatchProjects)
		projects, err := s.Q.WakeListWebhookProjects(ctx, tx, db.WakeListWebhookProjectsParams{AgentIds: agents, After: s.dispatchAfter, MaxRows: int32(page)})
		if err != nil {
			return err
		}
		more = len(projects) == page
		next = uuid.Nil // the end of the projects: the next page starts over
		var params []river.InsertManyParams
		for i, p := range projects {
			if len(params) >= dispatchBatchSize {
				// The batch is full: the last project taken may hold more, so the next
				// batch starts at it (after the one before it).
				more, next = true, s.dispatchAfter
				if i >= 2 {
					next = projects[i-2]
				}
				break
			}
			if more {
				next = p
			}
			rows, err := s.Q.WakeTakeWebhook(ctx, tx, db.WakeTakeWebhookParams{ProjectID: p, AgentIds: agents, Now: now,
				Since: now.Add(-time.Hour), MaxRows: int32(dispatchBatchSize - len(params)), OnlineSince: now.Add(-s.onlineWindow())})
			if err != nil {
				return err
			}
			for _, r := range rows {
				params = append(params, river.InsertManyParams{Args: DeliverArgs{ProjectID: r.ProjectID, WakeID: r.ID},
					InsertOpts: &river.InsertOpts{MaxAttempts: s.maxAttempts(), Queue: jobs.QueueDeliveries}})
			}
		}
		n = len(params)
		if n == 0 {
			return nil
		}
		return s.Jobs.InsertManyTx(ctx, jobs.PgxTx(tx), params)
	})
	if err != nil {
		return 0, false, fmt.Errorf("wake dispatch: %w", err)
	}
	s.dispatchAfter = next
	return n, more, nil
}

// settleSending ends a sending wake's delivery as status (delivered, dead, sending again,
// or back to pending). Back to pending is refused when newer work opened another pending
// wake for the part meanwhile (one pending wake a part): its items join that wake, which
// wakes the part for all of them, and it is canceled. Canceled alone, it dropped its
// threads and its urgency: an urgent message waited behind a spent budget, or was never
// nudged about once the newer wake's own message was acked.
func (s *Service) settleSending(ctx context.Context, projectID, id uuid.UUID, status string, attempted int32, lastErr *string, now time.Time) error {
	finish := func(tx *pg.Tx, status string, lastErr *string) (int64, error) {
		return s.Q.WakeFinishSend(ctx, tx, db.WakeFinishSendParams{ProjectID: projectID, ID: id,
			Status: status, Attempted: attempted, LastError: lastErr, Now: now})
	}
	// The pending wake may be claimed between the refusal and the merge (then there is
	// none to merge into, and this one may be pending again): a few turns settle it.
	errNoPending := errors.New("no pending wake to merge into")
	for range 3 {
		err := s.DB.Operator(ctx, func(tx *pg.Tx) error { _, err := finish(tx, status, lastErr); return err })
		if status != StatusPending || !pg.IsUniqueViolation(err) {
			return err
		}
		err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
			// Ended first: the row is locked, and proven still sending, before its items
			// are read into the pending wake (a thread closed meanwhile waits for this,
			// then takes its share out of the pending wake).
			msg := "merged into the newer pending wake of the part"
			if n, err := finish(tx, StatusCanceled, &msg); err != nil || n == 0 {
				return err
			}
			n, err := s.Q.WakeMergeSendingIntoPending(ctx, tx, db.WakeMergeSendingIntoPendingParams{ProjectID: projectID, ID: id, Now: now, MaxThreads: MaxThreads})
			if err == nil && n == 0 {
				return errNoPending // roll the cancel back and try again
			}
			return err
		})
		if !errors.Is(err, errNoPending) {
			return err
		}
	}
	return fmt.Errorf("wake %s: the part's pending wake changed three times while it was settled", id)
}

// SendingStaleAfter is how long a wake may stay sending before the sweep takes its delivery
// for lost. A live delivery moves the wake at every attempt, and the longest wait between
// two is the backoff's largest step before the last attempt (640 s with the defaults),
// plus the attempt itself (30 s) and, when a replica died mid-attempt, River's rescue (3
// minutes, jobs.Runner): well under this.
const SendingStaleAfter = 30 * time.Minute

// rescueBatch bounds the lost deliveries one sweep tick puts back; the next tick takes
// the rest.
const rescueBatch = 500

// rescueSending puts back to pending the wakes whose delivery job ended without settling
// them (its replica was killed on the last attempt, or the last write failed), so the
// dispatch that follows sends them again: a receiver may get a nudge twice, never not at
// all. Left alone they would stay sending for good: never listed as dead letters, never
// retried, never cleaned up.
func (s *Service) rescueSending(ctx context.Context, now time.Time) (int, error) {
	var rows []db.WakeListStaleSendingRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		rows, err = s.Q.WakeListStaleSending(ctx, tx, db.WakeListStaleSendingParams{Before: now.Add(-SendingStaleAfter), MaxRows: rescueBatch})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("list lost deliveries: %w", err)
	}
	msg := "the delivery was interrupted (its job ended without an outcome); sent again"
	for i, r := range rows {
		if err := s.settleSending(ctx, r.ProjectID, r.ID, StatusPending, 0, &msg, now); err != nil {
			return i, fmt.Errorf("put back a lost delivery: %w", err)
		}
	}
	return len(rows), nil
}

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	s *Service
}

func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return 30 * time.Second }

// permanentError marks a refusal that retrying cannot fix (a 4xx other than 408 and 429).
type permanentError struct{ error }

func (w *deliverWorker) Work(ctx context.Context, j *river.Job[DeliverArgs]) error {
	s := w.s
	var row db.WakeGetForDeliveryRow
	var target db.WakeTargetGetRow
	hasTarget := false
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		row, err = s.Q.WakeGetForDelivery(ctx, tx, db.WakeGetForDeliveryParams{ProjectID: j.Args.ProjectID, ID: j.Args.WakeID})
		if err != nil {
			return err
		}
		// The webhook is read apart: wake_target is sharded by organisation (Citus joins
		// only within one shard group). None (deleted meanwhile) is no row.
		target, err = s.Q.WakeTargetGet(ctx, tx, db.WakeTargetGetParams{OrgID: row.AgentOrgID, AgentID: row.AgentID})
		if pg.IsNoRows(err) {
			return nil
		}
		hasTarget = err == nil
		return err
	})
	if pg.IsNoRows(err) {
		return nil // deleted with its project
	}
	if err != nil {
		return err
	}
	if row.Status != StatusSending {
		return nil // canceled (its thread closed) or already settled
	}
	finish := func(status string, attempted int32, lastErr *string) error {
		err := s.settleSending(ctx, row.ProjectID, row.ID, status, attempted, lastErr, s.now())
		if err == nil && status != StatusSending {
			// The part's next pending wake waited for this delivery (one a part at a
			// time, WakeTakeWebhook): dispatch now, not at the sweep's next tick.
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
		return err
	}
	if !hasTarget || s.Box == nil {
		return finish(StatusPending, 0, nil) // no webhook (any more): a pager may take it
	}
	if row.ParkedUntil != nil {
		return finish(StatusPending, 0, nil) // parked meanwhile: delivered after the sweep unparks it
	}
	if !row.Admitted {
		// The guest's agreement ended meanwhile: the wake waits, as one raised then would,
		// and is taken again only if the agreement is active again.
		return finish(StatusPending, 0, nil)
	}
	secret, err := s.Box.Open(target.SecretEnc, row.AgentID[:])
	if err != nil {
		msg := "cannot decrypt the webhook secret (was RELAYROOM_SECRET_KEY changed? set the webhook again)"
		return finish(StatusDead, 1, &msg)
	}
	wk := Wake{ID: row.ID, ProjectID: row.ProjectID, Project: row.ProjectName, Part: row.Part,
		Agent: row.OrgSlug + "/" + row.AgentSlug, Count: int(row.Count), Sources: row.Sources,
		ThreadIDs: threadIDs(row.ThreadCounts), Urgent: row.Urgent, LastItemID: row.LastItemID,
		CreatedAt: row.CreatedAt, Attempt: j.Attempt}
	// One organisation's receivers hold at most a few of the delivery workers: past that,
	// the job is tried again shortly, its attempt not counted. Without it, one tenant
	// whose receivers accept and stall held every worker, and every other tenant's
	// deliveries waited behind them.
	limit := cmp.Or(s.MaxDeliveriesPerOrg, DefaultMaxDeliveriesPerOrg)
	if !s.deliveries.Take(row.AgentOrgID, limit) {
		return river.JobSnooze(deliverySnooze)
	}
	defer s.deliveries.Give(row.AgentOrgID)
	sendErr := s.post(ctx, target.Url, string(secret), wk)
	if sendErr == nil {
		return finish(StatusDelivered, 1, nil)
	}
	msg := sendErr.Error()
	var perm permanentError
	if errors.As(sendErr, &perm) || j.Attempt >= j.MaxAttempts {
		s.Log.WarnContext(ctx, "wake webhook: dead letter", "wake", row.ID.String(), "agent", wk.Agent, "attempts", j.Attempt, "error", msg)
		return finish(StatusDead, 1, &msg)
	}
	if err := finish(StatusSending, 1, &msg); err != nil {
		return err
	}
	return sendErr // River retries with backoff
}

// DefaultMaxDeliveriesPerOrg is how many webhook posts of one organisation a process
// sends at once (of the deliveries queue's workers, 10 by default).
const DefaultMaxDeliveriesPerOrg = 4

// deliverySnooze is how long a delivery past its organisation's bound waits to be tried
// again.
const deliverySnooze = 2 * time.Second

// withoutURL drops the URL net/http quotes in its errors: the error is kept as the wake's
// last_error, which the project's people read on the dashboard (a guest's webhook under
// the host's eyes too), and a webhook URL may carry a token in its query.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func (s *Service) post(ctx context.Context, target, secret string, wk Wake) error {
	body, err := json.Marshal(wk)
	if err != nil {
		return permanentError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return permanentError{withoutURL(err)}
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "relayroom-wake/1")
	req.Header.Set(HeaderWakeID, wk.ID.String())
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderSignature, Sign(secret, now, body))
	// Never follow redirects: the signature is for the configured URL only.
	cc := *s.webhookClient()
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := cc.Do(req)
	if err != nil {
		return fmt.Errorf("post: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	default:
		return permanentError{fmt.Errorf("webhook refused the wake: %d", resp.StatusCode)}
	}
}
