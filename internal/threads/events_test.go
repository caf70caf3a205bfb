package threads_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/threads"
)

func i64(v int64) *int64 { return &v }

func TestEventUsageIsAggregatedPerPartModelAndDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	sc := e.sc("backend")
	for i := 0; i < 2; i++ {
		r, err := e.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Detail: json.RawMessage(`{"note":"step"}`),
			Usage: &threads.Usage{InputTokens: i64(1000), OutputTokens: i64(10), CacheTokens: i64(5), CostUSD: ptr(0.0042), Model: "claude-x"}})
		if err != nil || r.EventID == "" {
			t.Fatalf("%+v %v", r, err)
		}
	}
	must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "done", Usage: &threads.Usage{InputTokens: i64(1), Model: "other-model"}}))
	n := e.count(t, "SELECT count(*) FROM usage_daily WHERE member_id = $1 AND model = 'claude-x' AND day = (now() AT TIME ZONE 'UTC')::date AND input_tokens = 2000 AND output_tokens = 20 AND cache_tokens = 10 AND events = 2 AND cost_usd = 0.0084", sc.MemberID)
	if n != 1 {
		t.Fatal("usage not aggregated per part, model and day")
	}
	if n := e.count(t, "SELECT count(*) FROM usage_daily"); n != 2 {
		t.Fatalf("%d usage rows, want one per model", n)
	}
	if n := e.count(t, "SELECT count(*) FROM activity_event"); n != 3 {
		t.Fatalf("%d activity events", n)
	}
	_, err := e.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &threads.Usage{InputTokens: i64(1)}})
	testfix.WantErr(t, err, apperr.Invalid, "usage_model_required")
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &threads.Usage{InputTokens: i64(-1), Model: "m"}})
	testfix.WantErr(t, err, apperr.Invalid, "")
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &threads.Usage{CostUSD: ptr(-0.1), Model: "m"}})
	testfix.WantErr(t, err, apperr.Invalid, "")
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Detail: json.RawMessage(`{"part":"architect"}`)})
	testfix.WantErr(t, err, apperr.Forbidden, "own_part_only")
	// The service's own events (a person canceling a thread) cannot be forged by an agent.
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: threads.EventCanceled, Detail: json.RawMessage(`{"by":"Ana [Acme] (human)"}`)})
	testfix.WantErr(t, err, apperr.Invalid, "invalid_argument")
}

func TestEventComposingIsTransientAndNeverWakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	th := e.open(t)
	wakes := len(e.waker.queued)
	r := must[threads.EventResult](t)(e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "composing", Detail: json.RawMessage(`{"threadId":"` + th + `"}`)}))
	if r.ComposingFor == nil || *r.ComposingFor != 10 {
		t.Fatalf("%+v", r)
	}
	if len(e.waker.queued) != wakes {
		t.Fatal("composing queued a wake")
	}
	if n := e.count(t, "SELECT count(*) FROM activity_event"); n != 0 {
		t.Fatal("composing was stored as activity")
	}
	if s := must[threads.ShowResult](t)(e.svc.Show(ctx, e.sc("architect"), th)); len(s.Composing) != 1 || s.Composing[0] != "backend" {
		t.Fatalf("composing not shown: %+v", s.Composing)
	}
	// Transient: past its ~10 s it is gone.
	e.exec(t, "UPDATE composing SET expires_at = now() - interval '1 second'")
	if s := must[threads.ShowResult](t)(e.svc.Show(ctx, e.sc("architect"), th)); len(s.Composing) != 0 {
		t.Fatalf("composing outlived its window: %+v", s.Composing)
	}
	_, err := e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "composing"})
	testfix.WantErr(t, err, apperr.Invalid, "thread_required")
	_, err = e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "composing", Detail: json.RawMessage(`{"threadId":"` + uuid.NewString() + `"}`)})
	testfix.WantErr(t, err, apperr.NotFound, "thread_not_found")
}

func TestEventLimitedParksOnlyYourOwnPart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	sc := e.sc("backend")
	parked := func() bool {
		return e.count(t, "SELECT count(*) FROM membership WHERE part = 'backend' AND parked_until IS NOT NULL") == 1
	}
	reset := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r := must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"` + reset.Format(time.RFC3339) + `"}`)}))
	if r.Parked == nil || !*r.Parked || r.ParkedUntil == nil || !time.Time(*r.ParkedUntil).Equal(reset) || r.Clamped {
		t.Fatalf("park: %+v", r)
	}
	if !parked() {
		t.Fatal("membership not parked")
	}
	if n := e.count(t, "SELECT count(*) FROM membership WHERE parked_until IS NOT NULL"); n != 1 {
		t.Fatalf("%d parts parked, want only the caller's", n)
	}
	roster := must[[]threads.RosterEntry](t)(e.svc.Roster(ctx, e.sc("architect")))
	for _, p := range roster {
		if (p.Part == "backend") != (p.LimitedUntil != nil) {
			t.Fatalf("roster limitedUntil: %+v", p)
		}
	}
	// Every timestamp of a result is RFC 3339 UTC with milliseconds, like every other one.
	b, err := json.Marshal(roster)
	if err != nil {
		t.Fatal(err)
	}
	stamp := regexp.MustCompile(`"(lastSeen|limitedUntil)":"([^"]*)"`)
	found := stamp.FindAllStringSubmatch(string(b), -1)
	if len(found) == 0 {
		t.Fatalf("no timestamps in the roster: %s", b)
	}
	for _, m := range found {
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(m[2]) {
			t.Fatalf("roster %s %q is not RFC 3339 UTC with milliseconds", m[1], m[2])
		}
	}
	// Clamped to 24 h.
	r = must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"` + time.Now().Add(72*time.Hour).UTC().Format(time.RFC3339) + `"}`)}))
	if !r.Clamped || time.Until(time.Time(*r.ParkedUntil)) > 24*time.Hour+time.Second {
		t.Fatalf("not clamped: %+v", r)
	}
	// RFC 3339 allows a lower-case t and z: such a time parks, and was refused as not RFC 3339.
	lower := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	r = must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"` + strings.ToLower(lower.Format(time.RFC3339)) + `"}`)}))
	if !*r.Parked || !time.Time(*r.ParkedUntil).Equal(lower) {
		t.Fatalf("a lower-case resetAt: %+v", r)
	}
	// Invalid strings are rejected and change nothing.
	// A timestamp without an offset names no instant: the error says which form to use.
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"2026-06-11T08:00:00"}`)})
	testfix.WantErr(t, err, apperr.Invalid, "invalid_reset_at")
	if !strings.Contains(err.Error(), "no UTC offset") || !strings.Contains(err.Error(), "2026-06-11T08:00:00Z") {
		t.Fatalf("resetAt without offset: %v", err)
	}
	for _, bad := range []string{`{"resetAt":"tomorrow"}`, `{"resetAt":12}`, `{"resetAt":"2026-13-01T00:00:00Z"}`} {
		_, err := e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(bad)})
		testfix.WantErr(t, err, apperr.Invalid, "invalid_reset_at")
	}
	if !parked() {
		t.Fatal("an invalid resetAt unparked")
	}
	// Past unparks; missing unparks.
	r = must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"2020-01-01T00:00:00Z"}`)}))
	if *r.Parked || parked() {
		t.Fatalf("past resetAt did not unpark: %+v", r)
	}
	must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"resetAt":"` + reset.Format(time.RFC3339) + `"}`)}))
	r = must[threads.EventResult](t)(e.svc.Event(ctx, sc, threads.EventInput{Type: "limited"}))
	if *r.Parked || parked() {
		t.Fatalf("missing resetAt did not unpark: %+v", r)
	}
	// Only one's own part.
	_, err = e.svc.Event(ctx, sc, threads.EventInput{Type: "limited", Detail: json.RawMessage(`{"part":"architect","resetAt":"` + reset.Format(time.RFC3339) + `"}`)})
	testfix.WantErr(t, err, apperr.Forbidden, "own_part_only")
	if parked() {
		t.Fatal("parked after a refused event")
	}
}

func TestEventErrorContradictsDemotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	l := must[knowledge.LearnResult](t)(e.know.Learn(ctx, e.sc("architect"), knowledge.LearnInput{Title: "Port 8080 is free", Body: "The staging box keeps port 8080 free.", Kind: "fact"}))
	if _, err := e.know.Approve(ctx, e.sc("architect").ProjectID, uuid.MustParse(l.KnowledgeID), "alice"); err != nil {
		t.Fatal(err)
	}
	e.exec(t, `UPDATE project SET knowledge_config = '{"contradictionPenalty":0.7}'`)
	r := must[threads.EventResult](t)(e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "error", Detail: json.RawMessage(`{"contradicts":"` + l.KnowledgeID + `","message":"port 8080 was taken"}`)}))
	if r.Contradiction == nil || r.Contradiction.Status != "demoted" {
		t.Fatalf("%+v", r)
	}
	if rec := must[knowledge.RecallResult](t)(e.know.Recall(ctx, e.sc("backend"), knowledge.RecallInput{Query: "port 8080"})); len(rec.Entries) != 0 {
		t.Fatalf("demoted entry recalled: %+v", rec)
	}
	_, err := e.svc.Event(ctx, e.sc("peter"), threads.EventInput{Type: "error", Detail: json.RawMessage(`{"contradicts":"` + l.KnowledgeID + `"}`)})
	testfix.WantErr(t, err, apperr.NotFound, "knowledge_not_found")
	_, err = e.svc.Event(ctx, e.sc("reader"), threads.EventInput{Type: "error", Detail: json.RawMessage(`{"contradicts":"` + l.KnowledgeID + `"}`)})
	testfix.WantErr(t, err, apperr.Forbidden, "write_access_required")
	// An error without contradicts is plain activity.
	must[threads.EventResult](t)(e.svc.Event(ctx, e.sc("reader"), threads.EventInput{Type: "error", Detail: json.RawMessage(`{"message":"build failed"}`)}))
	// An empty contradicts was recorded as that, demoting nothing and saying nothing.
	_, err = e.svc.Event(ctx, e.sc("backend"), threads.EventInput{Type: "error", Detail: json.RawMessage(`{"contradicts":" "}`)})
	testfix.WantErr(t, err, apperr.Invalid, "invalid_argument")
}

// TestUsageNumbersAreBoundedByTheirColumns: a usage report beyond what usage_daily holds
// (cost_usd is numeric(18,6), below 10^12) is the tool's validation error over MCP and
// the service's Invalid when called directly, never a numeric overflow inside
// PostgreSQL; and a day's totals stop at the columns' maxima instead of failing.
func TestUsageNumbersAreBoundedByTheirColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setupHTTP(t)
	t.Run("over MCP", func(t *testing.T) {
		for _, usage := range []map[string]any{
			{"model": "m", "cost_usd": 1e13},
			{"model": "m", "cost_usd": float64(threads.MaxUsageCostUSD) + 0.5},
			{"model": "m", "input_tokens": 1e19},
			{"model": "m", "output_tokens": threads.MaxUsageTokens + 1},
			{"model": "m", "cache_tokens": 9.3e18},
		} {
			a := h.as("backend", "event", map[string]any{"type": "progress", "usage": usage})
			if !a.IsError || a.errorCode() != "invalid_argument" || !strings.Contains(a.Text, "must be at most") {
				t.Errorf("%v: want invalid_argument, got %+v", usage, a)
			}
		}
		h.ok("backend", "event", map[string]any{"type": "progress", "usage": map[string]any{"model": "m",
			"cost_usd": threads.MaxUsageCostUSD, "input_tokens": threads.MaxUsageTokens}})
	})
	t.Run("called directly", func(t *testing.T) {
		sc := h.sc("backend")
		for _, u := range []threads.Usage{
			{Model: "m", CostUSD: ptr(1e13)},
			{Model: "m", InputTokens: i64(threads.MaxUsageTokens + 1)},
		} {
			_, err := h.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &u})
			testfix.WantErr(t, err, apperr.Invalid, "invalid_argument")
		}
	})
	t.Run("a day's totals saturate", func(t *testing.T) {
		sc := h.sc("architect")
		u := threads.Usage{Model: "saturated", CostUSD: ptr(float64(threads.MaxUsageCostUSD)), InputTokens: i64(threads.MaxUsageTokens)}
		must[threads.EventResult](t)(h.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &u}))
		h.exec(t, "UPDATE usage_daily SET cost_usd = 999999999999, input_tokens = 9223372036854775000 WHERE model = 'saturated'")
		must[threads.EventResult](t)(h.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &u}))
		if n := h.count(t, "SELECT count(*) FROM usage_daily WHERE model = 'saturated' AND cost_usd = 999999999999.999999 AND input_tokens = 9223372036854775807 AND events = 2"); n != 1 {
			t.Fatal("the day's totals did not stop at the columns' maxima")
		}
	})
}

// TestAPartsDayHoldsBoundedModels: each model an agent names was a row of usage_daily,
// which the usage page and its export read: 6,000 names made one page view take 10 s and
// 800 MB. Past MaxUsageModelsPerDay models in a day, a part's reports are added up under
// OtherUsageModel; the models it already has keep their rows.
func TestAPartsDayHoldsBoundedModels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setupHTTP(t)
	sc := h.sc("backend")
	report := func(model string) {
		t.Helper()
		u := threads.Usage{Model: model, InputTokens: i64(10)}
		must[threads.EventResult](t)(h.svc.Event(ctx, sc, threads.EventInput{Type: "progress", Usage: &u}))
	}
	for i := range threads.MaxUsageModelsPerDay + 5 {
		report(fmt.Sprintf("model-%d", i))
	}
	report("model-0")
	t.Run("the part's day holds the bound's models and the rest together", func(t *testing.T) {
		if n := h.count(t, "SELECT count(*) FROM usage_daily WHERE member_id = $1", sc.MemberID); n != threads.MaxUsageModelsPerDay+1 {
			t.Fatalf("%d rows, want %d models and one for the others", n, threads.MaxUsageModelsPerDay+1)
		}
		if n := h.count(t, "SELECT count(*) FROM usage_daily WHERE member_id = $1 AND model = $2 AND events = 5 AND input_tokens = 50", sc.MemberID, threads.OtherUsageModel); n != 1 {
			t.Fatal("the five models past the bound are not added up under the others' row")
		}
	})
	t.Run("a model the day already holds keeps its row", func(t *testing.T) {
		if n := h.count(t, "SELECT count(*) FROM usage_daily WHERE member_id = $1 AND model = 'model-0' AND events = 2", sc.MemberID); n != 1 {
			t.Fatal("the second report of a known model went elsewhere")
		}
	})
}

// TestEventDetailSecretsAreMasked: an event's detail is stored for the activity feed, so a
// secret in any of its strings is masked there, as in a message, and the call succeeds.
func TestEventDetailSecretsAreMasked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	token := "ghp_" + strings.Repeat("aB3dE5fG7h", 3) + "K9mN2p"
	detail := `{"message":"deploy failed with ` + token + `","steps":["clone","push ` + token + `"],"attempt":3}`
	if _, err := e.svc.Event(ctx, e.sc("architect"), threads.EventInput{Type: "error", Detail: json.RawMessage(detail)}); err != nil {
		t.Fatal(err)
	}
	stored := testfix.Scalar[string](t, e.d, `SELECT detail::text FROM activity_event WHERE type = 'error'`)
	if strings.Contains(stored, token) || strings.Count(stored, "REDACTED") != 2 || !strings.Contains(stored, `"attempt": 3`) {
		t.Fatalf("stored detail: %s", stored)
	}
}

// TestLearnNamesOnlyADuplicateTheCallerCouldRead: learn links every near-duplicate, but
// its answer names only one the caller could read anyway, a trusted entry or its own.
// It named another part's candidate: what others proposed, with an id to contradict,
// though candidates reach no other agent.
func TestLearnNamesOnlyADuplicateTheCallerCouldRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	learn := func(part string) knowledge.LearnResult {
		return must[knowledge.LearnResult](t)(e.svc.Knowledge.Learn(ctx, e.sc(part), knowledge.LearnInput{Title: "Run migrations before deploy",
			Body: "Run make migrate before every deploy of the API.", Kind: "procedure"}))
	}
	first := learn("architect")
	t.Run("the caller's own candidate is named", func(t *testing.T) {
		if again := learn("architect"); again.DuplicateOf == nil || *again.DuplicateOf != first.KnowledgeID {
			t.Fatalf("%+v", again)
		}
	})
	t.Run("another part's candidate is linked, not named", func(t *testing.T) {
		other := learn("backend")
		if other.DuplicateOf != nil {
			t.Fatalf("named: %+v", other)
		}
		if n := e.count(t, `SELECT count(*) FROM knowledge WHERE id = $1 AND duplicate_of = $2`, uuid.MustParse(other.KnowledgeID), uuid.MustParse(first.KnowledgeID)); n != 1 {
			t.Fatal("not linked for the review queue")
		}
	})
	t.Run("a trusted entry is named", func(t *testing.T) {
		if _, err := e.svc.Knowledge.Approve(ctx, e.sc("architect").ProjectID, uuid.MustParse(first.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		if other := learn("backend"); other.DuplicateOf == nil || *other.DuplicateOf != first.KnowledgeID {
			t.Fatalf("%+v", other)
		}
	})
	// Recall excludes an entry past its expiry before the sweep retires it: such an entry
	// is not one the caller could read, and naming it gave an id to contradict.
	t.Run("a trusted entry past its expiry is linked, not named", func(t *testing.T) {
		e.exec(t, `UPDATE knowledge SET expires_at = now() - interval '1 minute' WHERE id = $1`, uuid.MustParse(first.KnowledgeID))
		other := learn("frontend")
		if other.DuplicateOf != nil {
			t.Fatalf("named: %+v", *other.DuplicateOf)
		}
		if n := e.count(t, `SELECT count(*) FROM knowledge WHERE id = $1 AND duplicate_of = $2`, uuid.MustParse(other.KnowledgeID), uuid.MustParse(first.KnowledgeID)); n != 1 {
			t.Fatal("not linked for the review queue")
		}
	})
}
