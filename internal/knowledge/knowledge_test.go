package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
	"github.com/relayroom/relayroom/internal/wiretime"
	sqlfiles "github.com/relayroom/relayroom/sql"
)

// The cast: architect (write) and reader (read) in project one, peter in project two.
var cast = []string{"architect", "reader, access: read"}

type env struct {
	*testfix.Bundle
	d      *pg.DB
	k      *knowledge.Service
	res    admin.Result
	scopes map[string]tenancy.Scope
	arch   tenancy.Scope // the cast's writer, who learns in most tests
}

func setup(t testing.TB) *env {
	t.Helper()
	b := testfix.Seed(t, testfix.TwoProjects(cast...))
	k, err := knowledge.New(knowledge.Deps{DB: b.DB, Detector: testfix.Detector(t), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	scopes := b.CastScopes(t, cast...)
	return &env{Bundle: b, d: b.DB, res: b.Result, k: k, scopes: scopes, arch: scopes["architect"]}
}

func (e *env) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	e.Exec(t, sql, args...)
}

// learn records in as architect, failing the test when it is refused.
func (e *env) learn(t testing.TB, in knowledge.LearnInput) knowledge.LearnResult {
	t.Helper()
	l, err := e.k.Learn(context.Background(), e.arch, in)
	if err != nil {
		t.Fatalf("learn %q: %v", in.Title, err)
	}
	return l
}

// approve makes architect's project's entry id trusted, as a person (alice) does.
func (e *env) approve(t testing.TB, id string) knowledge.Decision {
	t.Helper()
	d, err := e.k.Approve(context.Background(), e.arch.ProjectID, uuid.MustParse(id), "alice")
	if err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
	return d
}

// trusted learns in and approves it: an entry recall returns.
func (e *env) trusted(t testing.TB, in knowledge.LearnInput) knowledge.LearnResult {
	t.Helper()
	l := e.learn(t, in)
	e.approve(t, l.KnowledgeID)
	return l
}

// recall runs sc's recall of query, failing the test when it errs.
func (e *env) recall(t testing.TB, sc tenancy.Scope, in knowledge.RecallInput) knowledge.RecallResult {
	t.Helper()
	r, err := e.k.Recall(context.Background(), sc, in)
	if err != nil {
		t.Fatalf("recall %q: %v", in.Query, err)
	}
	return r
}

// wantRecalled fails the test unless architect's recall of query returns n entries.
func (e *env) wantRecalled(t testing.TB, query string, n int) {
	t.Helper()
	if r := e.recall(t, e.arch, knowledge.RecallInput{Query: query}); len(r.Entries) != n {
		t.Fatalf("recall %q: %d entries, want %d: %+v", query, len(r.Entries), n, r)
	}
}

func TestLearnIsACandidateUntilAPersonApproves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch, reader, peter := e.arch, e.scopes["reader"], e.scopes["peter"]
	var l knowledge.LearnResult
	var r knowledge.RecallResult // reader's recall after the approval
	testfix.Step(t, "a learned entry is a candidate, never recalled", func(t *testing.T) {
		l = e.learn(t, knowledge.LearnInput{Title: "Deploys need the rollback flag", Body: "Always pass --rollback to the deploy script on Fridays.", Kind: "procedure"})
		testfix.Check(t, "status", l.Status, "candidate")
		e.wantRecalled(t, "deploy rollback", 0)
	})
	testfix.Step(t, "a person approves it once", func(t *testing.T) {
		testfix.Check(t, "approved status", e.approve(t, l.KnowledgeID).Status, "trusted")
		_, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
		testfix.WantErr(t, err, apperr.Conflict, "already_decided")
	})
	testfix.Step(t, "another project's id answers not found", func(t *testing.T) {
		_, err := e.k.Approve(ctx, peter.ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
		testfix.WantErr(t, err, apperr.NotFound, "")
	})
	testfix.Step(t, "a read-only part may recall but not learn", func(t *testing.T) {
		r = e.recall(t, reader, knowledge.RecallInput{Query: "deploy rollback"})
		if len(r.Entries) != 1 || r.Entries[0].ID != l.KnowledgeID || r.QueryID == "" {
			t.Fatalf("recall after approval: %+v", r)
		}
		_, err := e.k.Learn(ctx, reader, knowledge.LearnInput{Title: "x", Body: "y", Kind: "fact"})
		testfix.WantErr(t, err, apperr.Forbidden, "write_access_required")
	})
	testfix.Step(t, "another project recalls nothing of it", func(t *testing.T) {
		if r2 := e.recall(t, peter, knowledge.RecallInput{Query: "deploy rollback"}); len(r2.Entries) != 0 {
			t.Fatalf("recall crossed projects: %+v", r2)
		}
	})
	testfix.Step(t, "the kind filter leaves out other kinds", func(t *testing.T) {
		if r3 := e.recall(t, arch, knowledge.RecallInput{Query: "deploy rollback", Kind: ptr("pitfall")}); len(r3.Entries) != 0 {
			t.Fatalf("kind filter: %+v", r3)
		}
	})
	testfix.Step(t, "recall_used takes only ids the query returned, once each", func(t *testing.T) {
		if err := e.k.RecallUsed(ctx, reader, r.QueryID, l.KnowledgeID); err != nil {
			t.Fatal(err)
		}
		err := e.k.RecallUsed(ctx, reader, r.QueryID, l.KnowledgeID)
		testfix.WantErr(t, err, apperr.Conflict, "already_reported")
		err = e.k.RecallUsed(ctx, reader, r.QueryID, uuid.NewString())
		testfix.WantErr(t, err, apperr.Invalid, "not_returned")
		err = e.k.RecallUsed(ctx, peter, r.QueryID, l.KnowledgeID)
		testfix.WantErr(t, err, apperr.NotFound, "query_not_found")
	})
	testfix.Step(t, "a query belongs to the part that ran it", func(t *testing.T) {
		// Another part of the same project cannot report its use (it would inflate the hit
		// rate), and learns nothing of it.
		r7 := e.recall(t, reader, knowledge.RecallInput{Query: "deploy rollback"})
		if len(r7.Entries) != 1 {
			t.Fatalf("reader's recall: %+v", r7)
		}
		err := e.k.RecallUsed(ctx, arch, r7.QueryID, l.KnowledgeID)
		testfix.WantErr(t, err, apperr.NotFound, "query_not_found")
		empty := e.recall(t, arch, knowledge.RecallInput{Query: "zzqqxx unrelated"})
		err = e.k.RecallUsed(ctx, arch, empty.QueryID, l.KnowledgeID)
		testfix.WantErr(t, err, apperr.Invalid, "not_returned")
	})
	testfix.Step(t, "title words and a typo of them find it, an unrelated word does not", func(t *testing.T) {
		e.wantRecalled(t, "rollback flag", 1)
		e.wantRecalled(t, "rollbak", 1) // the title's trigrams
		e.wantRecalled(t, "kubernetes", 0)
	})
	testfix.Step(t, "a lone typo of a body word finds its entry", func(t *testing.T) {
		// The body's words by trigram; an unrelated misspelling still finds nothing.
		cdn := e.trusted(t, knowledge.LearnInput{Title: "Static assets", Body: "Images are served through CloudFront with a one-day cache.", Kind: "fact"})
		if r8 := e.recall(t, arch, knowledge.RecallInput{Query: "cloudfrnt"}); len(r8.Entries) != 1 || r8.Entries[0].ID != cdn.KnowledgeID {
			t.Fatalf("recall of a body word with a typo: %+v", r8)
		}
		e.wantRecalled(t, "kubernets", 0)
	})
	testfix.Step(t, "the hit rate counts what recalls returned and what was used", func(t *testing.T) {
		h, err := e.k.RecallHitRate(ctx, arch, time.Now().Add(-time.Hour))
		if err != nil || h.Returned != 5 || h.Used != 1 || h.Rate != 0.2 {
			t.Fatalf("hit rate: %+v %v", h, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestContradictionsDemoteAndExpiryIsHonouredAtReadTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.arch
	l := e.trusted(t, knowledge.LearnInput{Title: "Cache TTL is five minutes", Body: "The edge cache keeps pages for five minutes.", Kind: "fact"})
	contradict := func() knowledge.Contradiction {
		var c knowledge.Contradiction
		err := e.d.InTenant(ctx, arch.Tenant(), func(tx *pg.Tx) (err error) {
			c, err = e.k.Contradict(ctx, tx, arch, l.KnowledgeID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("one contradiction demotes a trusted entry and lowers its confidence", func(t *testing.T) {
		if c := contradict(); c.Status != "demoted" || c.Confidence != 0.75 {
			t.Fatalf("first contradiction: %+v", c)
		}
		e.wantRecalled(t, "cache TTL", 0)
	})
	t.Run("contradicting a demoted entry answers that it is demoted", func(t *testing.T) {
		if c := contradict(); c.Status != "demoted" || c.Confidence != 0.5 {
			t.Fatalf("second contradiction: %+v", c)
		}
	})
	t.Run("a person can approve a demoted entry again", func(t *testing.T) {
		e.approve(t, l.KnowledgeID)
		e.wantRecalled(t, "cache TTL", 1)
	})
	t.Run("a candidate is demoted by a contradiction too", func(t *testing.T) {
		l = e.learn(t, knowledge.LearnInput{Title: "Deploys happen on Fridays", Body: "We deploy every Friday afternoon.", Kind: "fact"})
		if got := contradict(); got.Status != "demoted" {
			t.Fatalf("candidate contradiction: %+v", got)
		}
	})
	t.Run("the penalty is read from knowledge_config on every decision", func(t *testing.T) {
		l = e.trusted(t, knowledge.LearnInput{Title: "Queue size limit", Body: "Queues hold at most 1000 jobs.", Kind: "fact"})
		e.exec(t, `UPDATE project SET knowledge_config = knowledge_config || '{"contradictionPenalty":0.9}'::jsonb WHERE id = $1`, arch.ProjectID)
		if c := contradict(); c.Status != "demoted" || c.Confidence != 0.1 {
			t.Fatalf("config penalty not applied: %+v", c)
		}
	})
	t.Run("an expired trusted entry is left out before the sweep, then retired by it", func(t *testing.T) {
		l3 := e.trusted(t, knowledge.LearnInput{Title: "Release freeze", Body: "No releases during the freeze week.", Kind: "decision", ExpiresAt: ptr(wiretime.Arg(time.Now().Add(time.Hour)))})
		e.wantRecalled(t, "release freeze", 1)
		e.exec(t, "UPDATE knowledge SET expires_at = now() - interval '1 second' WHERE id = $1", uuid.MustParse(l3.KnowledgeID))
		e.wantRecalled(t, "release freeze", 0)
		if n, err := e.k.ExpireDue(ctx); err != nil || n != 1 {
			t.Fatalf("ExpireDue: %d %v", n, err)
		}
	})
	t.Run("a candidate past its expiry is not approved", func(t *testing.T) {
		// The approval answered trusted, which recall never returned.
		l := e.learn(t, knowledge.LearnInput{Title: "Quokka feeding hours", Body: "The quokkas are fed at noon.", Kind: "fact", ExpiresAt: ptr(wiretime.Arg(time.Now().Add(time.Hour)))})
		e.exec(t, "UPDATE knowledge SET expires_at = now() - interval '1 second' WHERE id = $1", uuid.MustParse(l.KnowledgeID))
		_, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
		if e, ok := apperr.As(err); !ok || e.Code != apperr.Conflict || !strings.Contains(e.Message, "expired at") {
			t.Fatalf("approve an expired candidate: %v", err)
		}
	})
	t.Run("an expiry in the past is refused", func(t *testing.T) {
		_, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "x", Body: "y", Kind: "fact", ExpiresAt: ptr(wiretime.Arg(time.Now().Add(-time.Hour)))})
		testfix.WantErr(t, err, apperr.Invalid, "")
	})
	t.Run("a blank title or body is refused as such, not as redacted", func(t *testing.T) {
		// "   " answered "the body is empty once secrets are redacted ()", and a blank
		// title became "(redacted)".
		for _, in := range []knowledge.LearnInput{{Title: "Fine title", Body: "   ", Kind: "fact"}, {Title: " \t", Body: "A body worth keeping.", Kind: "fact"}, {Title: "Fine title", Body: "...", Kind: "fact"}} {
			_, err := e.k.Learn(ctx, arch, in)
			if e, ok := apperr.As(err); !ok || e.Code != apperr.Invalid || e.Reason != apperr.ReasonInvalidArgument || !strings.Contains(e.Message, "must not be blank") {
				t.Fatalf("%+v: %v", in, err)
			}
		}
	})
}

// stored is the body architect's project stores for the candidate id ("" when none).
func (e *env) stored(t testing.TB, id string) string {
	t.Helper()
	list, err := e.k.List(context.Background(), e.arch.ProjectID, "candidate", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID.String() == id {
			return r.Body
		}
	}
	return ""
}

func TestNearDuplicatesAreLinkedAndRedactionRunsOnEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	key, _, _ := auth.Generate(auth.AgentKeyPrefix)
	testfix.Step(t, "a near-duplicate is linked, an unrelated entry is not", func(t *testing.T) {
		a := e.learn(t, knowledge.LearnInput{Title: "Run migrations before deploy", Body: "Run make migrate before every deploy of the API.", Kind: "procedure"})
		b := e.learn(t, knowledge.LearnInput{Title: "Run migrations before deploy!", Body: "Run make migrate before every deploy of the API", Kind: "procedure"})
		if b.DuplicateOf == nil || *b.DuplicateOf != a.KnowledgeID {
			t.Fatalf("near-duplicate not linked: %+v", b)
		}
		if c := e.learn(t, knowledge.LearnInput{Title: "Frontend colours", Body: "Use the palette tokens, never hex codes.", Kind: "fact"}); c.DuplicateOf != nil {
			t.Fatalf("unrelated entry linked: %+v", c)
		}
		// Once the original is trusted, its near-duplicate is not made trusted beside it:
		// recall returned both, two of its five places for one thing.
		e.approve(t, a.KnowledgeID)
		_, err := e.k.Approve(ctx, e.arch.ProjectID, uuid.MustParse(b.KnowledgeID), "alice")
		if ae, ok := apperr.As(err); !ok || ae.Code != apperr.Conflict || !strings.Contains(ae.Message, "near-duplicate of trusted entry "+a.KnowledgeID) {
			t.Fatalf("approve the duplicate of a trusted entry: %v", err)
		}
		// Rejecting it stays possible.
		if _, err := e.k.Reject(ctx, e.arch.ProjectID, uuid.MustParse(b.KnowledgeID), "alice"); err != nil {
			t.Fatalf("reject the duplicate: %v", err)
		}
	})
	testfix.Step(t, "the text of a rejected or demoted entry learned again is linked to it", func(t *testing.T) {
		// The live entries' check does not see them; without the link the same text came
		// back to the review queue as if it had never been decided.
		in := knowledge.LearnInput{Title: "Pin the Go toolchain", Body: "Pin the Go toolchain with a toolchain line in go.mod.", Kind: "procedure"}
		first := e.learn(t, in)
		if _, err := e.k.Reject(ctx, e.arch.ProjectID, uuid.MustParse(first.KnowledgeID), "alice"); err != nil {
			t.Fatalf("reject: %v", err)
		}
		again := e.learn(t, in)
		if again.DuplicateOf == nil || *again.DuplicateOf != first.KnowledgeID {
			t.Fatalf("learned again after its rejection, not linked: %+v", again)
		}
		list, err := e.k.List(ctx, e.arch.ProjectID, knowledge.StatusCandidate, 10)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(list, func(r knowledge.Review) bool { return r.ID.String() == again.KnowledgeID })
		if i < 0 || list[i].DuplicateOfStatus == nil || *list[i].DuplicateOfStatus != knowledge.StatusRejected {
			t.Fatalf("the review queue does not say the original was rejected: %+v", list)
		}
		demoted := e.learn(t, knowledge.LearnInput{Title: "Cache the module downloads", Body: "Cache GOMODCACHE between CI runs.", Kind: "procedure"})
		e.exec(t, `UPDATE knowledge SET status = 'demoted' WHERE id = $1`, demoted.KnowledgeID)
		if l := e.learn(t, knowledge.LearnInput{Title: "Cache the module downloads", Body: "Cache GOMODCACHE between CI runs!", Kind: "procedure"}); l.DuplicateOf == nil || *l.DuplicateOf != demoted.KnowledgeID {
			t.Fatalf("learned again after its demotion, not linked: %+v", l)
		}
	})
	testfix.Step(t, "a secret is redacted before it is stored", func(t *testing.T) {
		l := e.learn(t, knowledge.LearnInput{Title: "The staging key", Body: "Use " + key + " for staging, and the ticket ACME-1234.", Kind: "fact"})
		if stored := e.stored(t, l.KnowledgeID); strings.Contains(stored, key) || !strings.Contains(stored, secrets.MarkerPrefix) {
			t.Fatalf("secret stored: %q", stored)
		}
	})
	testfix.Step(t, "a project rule applies too", func(t *testing.T) {
		e.exec(t, `UPDATE project SET settings = settings || '{"redactionRules":[{"name":"ticket","pattern":"ACME-[0-9]+"}]}'::jsonb WHERE id = $1`, e.arch.ProjectID)
		l2 := e.learn(t, knowledge.LearnInput{Title: "Tickets", Body: "See ACME-1234 for the details of it.", Kind: "fact"})
		if stored := e.stored(t, l2.KnowledgeID); strings.Contains(stored, "ACME-1234") {
			t.Fatalf("project rule not applied: %q", stored)
		}
	})
	testfix.Step(t, "a rule with a replacement of its own is reported, and empties a body it is all of", func(t *testing.T) {
		// Its replacement leaves no marker: learn's redacted left it out, and a body that
		// was only the code name was stored as "[codename]".
		e.exec(t, `UPDATE project SET settings = settings || '{"redactionRules":[{"name":"codename","pattern":"(?i)project\\s+falcon","replacement":"[codename]"}]}'::jsonb WHERE id = $1`, e.arch.ProjectID)
		l := e.learn(t, knowledge.LearnInput{Title: "Project Falcon launch", Body: "Project Falcon ships in May, after the audit.", Kind: "fact"})
		if !slices.Contains(l.Redacted, "codename") {
			t.Fatalf("redacted %v does not name the rule", l.Redacted)
		}
		_, err := e.k.Learn(ctx, e.arch, knowledge.LearnInput{Title: "Falcon only", Body: "Project  Falcon", Kind: "fact"})
		testfix.WantErr(t, err, apperr.Invalid, "empty_after_redaction")
	})
	testfix.Step(t, "an entry that is only a secret is refused", func(t *testing.T) {
		_, err := e.k.Learn(ctx, e.arch, knowledge.LearnInput{Title: "Only a key", Body: key, Kind: "fact"})
		testfix.WantErr(t, err, apperr.Invalid, "empty_after_redaction")
	})
	testfix.Step(t, "an unusable rule refuses the write", func(t *testing.T) {
		e.exec(t, `UPDATE project SET settings = settings || '{"redactionRules":[{"name":"bad","pattern":"("}]}'::jsonb WHERE id = $1`, e.arch.ProjectID)
		_, err := e.k.Learn(ctx, e.arch, knowledge.LearnInput{Title: "t", Body: "b", Kind: "fact"})
		testfix.WantErr(t, err, apperr.Conflict, "redaction_unresolvable")
	})
}

// TestLearnsOfOneTitleAtOnceAreLinked: near-duplicate learns that run at the same moment
// do not miss each other; every one but the first is linked.
func TestLearnsOfOneTitleAtOnceAreLinked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	// The learns meet at the entries' table: a transaction holding it makes each wait
	// there (or, with the title's lock, wait for it), then all go at once.
	tx := e.Holder(t)
	if _, err := tx.Exec(ctx, "LOCK TABLE knowledge IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	const learns = 4
	results := make(chan knowledge.LearnResult, learns)
	errs := make(chan error, learns)
	for i := range learns {
		go func() {
			l, err := e.k.Learn(ctx, e.arch, knowledge.LearnInput{Title: "Rotate the signing key" + strings.Repeat("!", i),
				Body: "Rotate the signing key every quarter and keep the old one for a day.", Kind: "procedure"})
			if err != nil {
				errs <- err
				return
			}
			results <- l
		}()
	}
	e.AwaitLockWaiters(t, learns, nil)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	linked := 0
	for range learns {
		select {
		case err := <-errs:
			t.Fatal(err)
		case l := <-results:
			if l.DuplicateOf != nil {
				linked++
			}
		}
	}
	if linked != learns-1 {
		t.Fatalf("%d of %d learns at once linked to a near-duplicate, want %d", linked, learns, learns-1)
	}
}

// TestNearDuplicateQueriesAgree: the near-duplicate check's two forms, rr_near_duplicate
// (owner's rights, the trigram index; plain PostgreSQL) and the request role's query
// (Citus, after the transaction wrote), find the same entry or none.
func TestNearDuplicateQueriesAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.arch
	for _, in := range []knowledge.LearnInput{
		{Title: "Run migrations before deploy", Body: "Run make migrate before every deploy of the API.", Kind: "procedure"},
		{Title: "Run migrations before each deploy", Body: "Run make migrate before each deploy of the web API.", Kind: "procedure"},
		{Title: "Frontend colours", Body: "Use the palette tokens, never hex codes.", Kind: "fact"},
	} {
		e.learn(t, in)
	}
	q := db.New()
	probes := []struct{ name, title, body string }{
		{"a near-duplicate", "Run migrations before deploy!", "Run make migrate before every deploy of the API"},
		{"the other near-duplicate", "Run migrations before each deploy", "Run make migrate before each deploy of the web API."},
		{"nothing alike", "Database backups", "Backups run nightly and are kept for thirty days."},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			text := p.title + " " + p.body
			var byFunction, byCaller uuid.UUID
			var errFunction, errCaller error
			if err := e.d.InTenant(ctx, arch.Tenant(), func(tx *pg.Tx) error {
				byFunction, errFunction = q.KnowledgeFindNearDuplicate(ctx, tx, db.KnowledgeFindNearDuplicateParams{
					Title: p.title, MinTitle: 0.6, Text: text, MinText: 0.8})
				byCaller, errCaller = q.KnowledgeFindNearDuplicateAsCaller(ctx, tx, db.KnowledgeFindNearDuplicateAsCallerParams{
					ProjectID: arch.ProjectID, Title: p.title, MinTitle: 0.6, Text: text, MinText: 0.8})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{errFunction, errCaller} {
				if err != nil && !pg.IsNoRows(err) {
					t.Fatal(err)
				}
			}
			if byFunction != byCaller || pg.IsNoRows(errFunction) != pg.IsNoRows(errCaller) {
				t.Fatalf("rr_near_duplicate found %v (%v), the caller's query %v (%v)", byFunction, errFunction, byCaller, errCaller)
			}
			if want := p.name != "nothing alike"; want == pg.IsNoRows(errCaller) {
				t.Fatalf("found: %v, want %v", !pg.IsNoRows(errCaller), want)
			}
		})
	}
}

// skipScanCountsOnCitus skips a test that reads this node's scan counts: on Citus the
// scans run on the workers (the router-plan test covers the plan there).
func skipScanCountsOnCitus(t *testing.T, e *env) {
	t.Helper()
	if e.d.Citus() {
		t.Skip("reads this node's scan counts; on Citus the scans run on the workers (the router-plan test covers the plan there)")
	}
}

// nearDuplicateScans runs learn's near-duplicate check of title in tx and returns how many
// scans it made of each of rels (the table, its indexes), in their order. It reads the
// transaction's own counts before and after: the counts of the connection's earlier
// transactions may not be flushed yet.
func nearDuplicateScans(ctx context.Context, tx *pg.Tx, title string, rels ...string) ([]int64, error) {
	const scans = `SELECT coalesce(array_agg(pg_stat_get_xact_numscans(r::regclass) ORDER BY o), '{}')
		FROM unnest($1::text[]) WITH ORDINALITY AS u(r, o)`
	var before, after []int64
	if err := tx.QueryRow(ctx, scans, rels).Scan(&before); err != nil {
		return nil, err
	}
	_, err := db.New().KnowledgeFindNearDuplicate(ctx, tx, db.KnowledgeFindNearDuplicateParams{
		Title: title, MinTitle: 0.6, Text: title + " and a body", MinText: 0.8})
	if err != nil && !pg.IsNoRows(err) {
		return nil, err
	}
	if err := tx.QueryRow(ctx, scans, rels).Scan(&after); err != nil {
		return nil, err
	}
	for i := range after {
		after[i] -= before[i]
	}
	return after, nil
}

// TestNearDuplicateReadsTheTitleIndex: learn's near-duplicate check in a project of a
// few thousand entries of ordinary words reads the title trigram index, not every live
// entry of the project (a sequential scan, or knowledge_review_idx and a filter, computed
// similarity() against each title: 100-155 ms a learn under load, docs/performance.md).
func TestNearDuplicateReadsTheTitleIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	skipScanCountsOnCitus(t, e)
	arch := e.scopes["architect"]
	// Titles and bodies of six and twelve common words, as agents write them: every
	// title shares trigrams ("the", "and") with most others.
	e.exec(t, `WITH w AS (SELECT ARRAY['the','and','for','deploy','service','check','after','before','build','cache',
			'the','with','config','rollback','release','database','migration','that','token','the'] AS a)
		INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
		SELECT $1, gen_random_uuid(), 'fact',
			(SELECT string_agg(a[1 + (g * p + p * p) % 20], ' ') FROM unnest(ARRAY[3, 7, 11, 13, 17, 19]) p),
			(SELECT string_agg(a[1 + (g * p + p) % 20], ' ') FROM unnest(ARRAY[3, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43]) p),
			CASE WHEN g % 4 = 0 THEN 'candidate' ELSE 'trusted' END, 0.5, 'learn'
		FROM w, generate_series(1, 2500) g`, arch.ProjectID)
	e.exec(t, "ANALYZE knowledge")
	for _, title := range []string{"broker culminates behind the freeman sand", "deploy the service after the database migration", "rollback token cache"} {
		t.Run(title, func(t *testing.T) {
			var n []int64
			err := e.d.InTenant(ctx, arch.Tenant(), func(tx *pg.Tx) (err error) {
				n, err = nearDuplicateScans(ctx, tx, title, "knowledge", "knowledge_live_trgm_idx", "knowledge_review_idx")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			seq, titleIndex, review := n[0], n[1], n[2]
			if seq != 0 || titleIndex != 1 || review != 0 {
				t.Fatalf("the near-duplicate check made %d sequential scans, %d of the title index and %d of the review index, want 0, 1 and 0", seq, titleIndex, review)
			}
		})
	}
}

// TestNearDuplicatePlanMadeOnAnEmptyTableReadsTheTitleIndex: a connection keeps the plan
// of rr_near_duplicate it made on its first call. Made while the table's statistics said
// it was empty (a new database), that plan must still read the title trigram index once
// entries have arrived, not compare every live title of the project (migration 000043).
func TestNearDuplicatePlanMadeOnAnEmptyTableReadsTheTitleIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	skipScanCountsOnCitus(t, e)
	arch := e.arch
	e.exec(t, "ANALYZE knowledge")
	var n []int64
	// One transaction, so one connection: its first check makes the plan, the entries
	// arrive without an ANALYZE, and the second check runs that plan.
	err := e.d.InTenant(ctx, arch.Tenant(), func(tx *pg.Tx) error {
		if _, err := nearDuplicateScans(ctx, tx, "first check of an empty project"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
			SELECT $1, gen_random_uuid(), 'fact', 'entry ' || g || ' about the deploy and the cache',
				'body of entry ' || g, 'candidate', 0.5, 'learn'
			FROM generate_series(1, 400) g`, arch.ProjectID); err != nil {
			return err
		}
		var err error
		n, err = nearDuplicateScans(ctx, tx, "rollback token cache after the release",
			"knowledge", "knowledge_live_trgm_idx", "knowledge_review_idx", "knowledge_pkey")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	seq, titleIndex, review, pkey := n[0], n[1], n[2], n[3]
	if seq != 0 || titleIndex != 1 || review != 0 || pkey != 0 {
		t.Fatalf("the check made %d sequential scans and %d scans of the title index, %d of the review index, %d of the primary key; want 0, 1, 0, 0", seq, titleIndex, review, pkey)
	}
}

// TestLearnedTitlesAreSearchableWithoutAPendingList: every learn searches the title
// trigram index for a near-duplicate right before it inserts; with GIN's fast update the
// entries learned since the last vacuum waited in a pending list that each of those
// searches read whole (docs/performance.md, "learn's near-duplicate check, and the write
// rows' Postgres time"). Entries learned one after another go into the index's tree.
func TestLearnedTitlesAreSearchableWithoutAPendingList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const learned = 40
	for i := range learned {
		e.learn(t, knowledge.LearnInput{Title: fmt.Sprintf("Pending list probe %d of the index", i),
			Body: fmt.Sprintf("Entry %d learned in a stream, searched by the next learn.", i), Kind: "fact"})
	}
	e.exec(t, "CREATE EXTENSION IF NOT EXISTS pgstattuple")
	if n := e.Count(t, "SELECT pending_tuples FROM pgstatginindex('knowledge_live_trgm_idx')"); n != 0 {
		t.Fatalf("the title index holds %d of the %d learned entries in its pending list, want 0", n, learned)
	}
	if n := e.Count(t, "SELECT count(*) FROM knowledge WHERE project_id = $1 AND duplicate_of IS NOT NULL", e.arch.ProjectID); n != learned-1 {
		t.Fatalf("%d of the %d near-identical entries were linked to an earlier one, want %d", n, learned, learned-1)
	}
}

func TestCIConfirmsOverHTTPWithItsProjectToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	l := e.learn(t, knowledge.LearnInput{Title: "CI pipeline caches go modules", Body: "The pipeline caches the module download directory.", Kind: "fact"})
	issued, err := e.k.IssueCIToken(ctx, e.arch.ProjectID)
	tok := issued.Token
	if err != nil || !strings.HasPrefix(tok, auth.CITokenPrefix) {
		t.Fatalf("token %q %v", tok, err)
	}
	otherIssued, err := e.k.IssueCIToken(ctx, e.scopes["peter"].ProjectID)
	if err != nil {
		t.Fatal(err)
	}
	other := otherIssued.Token
	if n := e.Count(t, "SELECT count(*) FROM ci_token WHERE secret_hash = sha256($1::bytea)", []byte(tok)); n != 1 {
		t.Fatalf("the token is not stored hashed (%d)", n)
	}
	srv := httptest.NewServer(knowledge.NewHandler(knowledge.HandlerDeps{Service: e.k}))
	defer srv.Close()
	post := func(project, id, token string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/projects/"+project+"/knowledge/"+id+"/confirm", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	pid := e.arch.ProjectID.String()
	for _, c := range []struct {
		name, project, token string
		want                 int
	}{
		{"no token", pid, "", 401},
		{"mistyped token", pid, testfix.Mistype(tok), 401},
		{"another project's token", pid, other, 401},
		{"another project's entry", e.scopes["peter"].ProjectID.String(), other, 404},
	} {
		if code, _ := post(c.project, l.KnowledgeID, c.token); code != c.want {
			t.Fatalf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	code, body := post(pid, l.KnowledgeID, tok)
	if code != 200 || body["status"] != "trusted" || body["confidence"] != 0.9 {
		t.Fatalf("confirm: %d %v", code, body)
	}
	if code, _ := post(pid, l.KnowledgeID, tok); code != 409 {
		t.Fatalf("second confirm: %d", code)
	}
	e.wantRecalled(t, "pipeline caches modules", 1)

	// An entry an agent contradicted is demoted: only a person may trust it again.
	refuted := e.learn(t, knowledge.LearnInput{Title: "Builds run on arm64 runners", Body: "Every build job runs on the arm64 runner pool.", Kind: "fact"})
	if err := e.d.InTenant(ctx, e.arch.Tenant(), func(tx *pg.Tx) error {
		_, err := e.k.Contradict(ctx, tx, e.arch, refuted.KnowledgeID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if code, body := post(pid, refuted.KnowledgeID, tok); code != 409 {
		t.Fatalf("CI confirmed a demoted entry: %d %v", code, body)
	}
	e.wantRecalled(t, "builds arm64 runners", 0)

	t.Run("the project's tokens are listed without their secrets", func(t *testing.T) {
		list, err := e.k.ListCITokens(ctx, e.arch.ProjectID)
		if err != nil || len(list) != 1 || list[0].ID != issued.ID || list[0].RevokedAt != nil ||
			!strings.HasPrefix(tok, strings.TrimSuffix(list[0].Prefix, "…")) || len(list[0].Prefix) >= len(tok) {
			t.Fatalf("%+v %v", list, err)
		}
	})
	t.Run("another project's token is not this project's to revoke", func(t *testing.T) {
		_, err := e.k.RevokeCIToken(ctx, e.arch.ProjectID, otherIssued.ID)
		if ae, ok := apperr.As(err); !ok || ae.Code != apperr.NotFound {
			t.Fatalf("%v, want NotFound", err)
		}
		if code, _ := post(e.scopes["peter"].ProjectID.String(), l.KnowledgeID, other); code != 404 {
			t.Fatalf("the other project's token stopped working: %d", code)
		}
	})
	t.Run("a revoked token is refused from its next confirmation on", func(t *testing.T) {
		fresh := e.learn(t, knowledge.LearnInput{Title: "Release tags are signed", Body: "Every release tag carries a signature.", Kind: "fact"})
		if revoked, err := e.k.RevokeCIToken(ctx, e.arch.ProjectID, issued.ID); err != nil || !revoked {
			t.Fatalf("revoke: %v %v", revoked, err)
		}
		if code, _ := post(pid, fresh.KnowledgeID, tok); code != 401 {
			t.Fatalf("a revoked token confirmed: %d", code)
		}
		list, err := e.k.ListCITokens(ctx, e.arch.ProjectID)
		if err != nil || len(list) != 1 || list[0].RevokedAt == nil {
			t.Fatalf("%+v %v", list, err)
		}
	})
	t.Run("revoking twice says nothing changed", func(t *testing.T) {
		if revoked, err := e.k.RevokeCIToken(ctx, e.arch.ProjectID, issued.ID); err != nil || revoked {
			t.Fatalf("second revoke: %v %v", revoked, err)
		}
	})
}

// TestRecallNeverScansBeyondItsProject reads the plan of the recall query: it must use
// the project-keyed trigram index and never a sequential scan of the table, so other
// projects' entries (and candidates) are never read.
func TestRecallNeverScansBeyondItsProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.arch
	// Other projects' trusted entries and this project's candidates, enough that the
	// planner prefers an index if one fits.
	e.exec(t, `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
		SELECT $1, gen_random_uuid(), 'fact', 'deploy rollback note ' || g, 'body about deploy rollback ' || g, 'trusted', 1, 'learn'
		FROM generate_series(1, 10000) g`, e.scopes["peter"].ProjectID)
	e.exec(t, `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
		SELECT $1, gen_random_uuid(), 'fact', 'deploy candidate ' || g, 'candidate about deploy ' || g, 'candidate', 0.5, 'learn'
		FROM generate_series(1, 10000) g`, arch.ProjectID)
	e.exec(t, `INSERT INTO knowledge (project_id, id, kind, title, body, status, confidence, source)
		SELECT $1, gen_random_uuid(), 'fact', 'trusted entry ' || g, 'trusted body ' || g, 'trusted', 1, 'learn'
		FROM generate_series(1, 50) g`, arch.ProjectID)
	e.exec(t, "ANALYZE knowledge")
	// The request calls rr_recall, which runs as the owner; its body is explained the same
	// way: on the owner's connection, with the transaction's tenant set.
	var plan []string
	err := e.d.Operator(ctx, func(tx *pg.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('app.project_id', $1, true), set_config('pg_trgm.word_similarity_threshold', '0.5', true)", arch.ProjectID.String()); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+recallBody(t, e), arch.ProjectID, "deploy rollback", "deploy rollback", nil, time.Now(), int32(60))
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan") {
		t.Fatalf("recall scans a table sequentially:\n%s", text)
	}
	// Every index scan of knowledge is keyed by the transaction's project.
	scans := 0
	for i, line := range plan {
		if !strings.Contains(line, "Index Scan") || !strings.Contains(line, "knowledge") {
			continue
		}
		scans++
		// The project is the query's $1 (rr_project(), read once by the function), shown as
		// the parameter or, in a plan made for its value, as the value.
		cond := ""
		if i+1 < len(plan) {
			cond = plan[i+1]
		}
		if !strings.Contains(cond, "Index Cond") || !(strings.Contains(cond, "project_id = $1") ||
			strings.Contains(cond, fmt.Sprintf("project_id = '%s'::uuid", arch.ProjectID))) {
			t.Fatalf("an index scan of knowledge is not bounded by the project:\n%s", text)
		}
	}
	if scans == 0 {
		t.Fatalf("recall uses no index of knowledge:\n%s", text)
	}

	// Without a tenant the function returns nothing, whatever the query.
	if n := testfix.Scalar[int](t, e.d, "SELECT count(*) FROM rr_recall('deploy rollback', 'deploy rollback', NULL, now())"); n != 0 {
		t.Fatalf("rr_recall without a tenant returned %d rows", n)
	}
}

// recallBody is rr_recall's body as installed, its named parameters numbered.
func recallBody(t testing.TB, e *env) string {
	t.Helper()
	var src string
	if err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), "SELECT prosrc FROM pg_proc WHERE proname = 'rr_recall'").Scan(&src)
	}); err != nil {
		t.Fatal(err)
	}
	q, err := testfix.RecallQuery(src)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestTheReviewListRefusesWhatItCannotList: a status that is none ("candidates") was
// taken as a filter matching nothing, so the review queue read as empty, and a limit
// out of range became 100 without a word.
func TestTheReviewListRefusesWhatItCannotList(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, c := range []struct {
		status string
		limit  int
		says   string
	}{
		{"candidates", 10, `status must be one of candidate, trusted, demoted, rejected, expired, got "candidates"`},
		{"candidate", 0, "limit must be 1 to 1000, got 0"},
		{"", knowledge.MaxList + 1, "limit must be 1 to 1000, got 1001"},
	} {
		t.Run(c.says, func(t *testing.T) {
			_, err := e.k.List(context.Background(), e.arch.ProjectID, c.status, c.limit)
			if ae, ok := apperr.As(err); !ok || ae.Code != apperr.Invalid || ae.Message != c.says {
				t.Fatalf("%v", err)
			}
		})
	}
}

// TestRecallFindsACompoundWrittenApart: a query that writes a compound as two words or
// with a hyphen finds the entry that writes it as one word.
func TestRecallFindsACompoundWrittenApart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	limits := e.trusted(t, knowledge.LearnInput{Title: "Database statement limits", Body: "The statement timeout is 5s on the request pool.", Kind: "fact"})
	gateway := e.trusted(t, knowledge.LearnInput{Title: "Gateway connections drop", Body: "Idle connections close after 30 seconds; send a keepalive every 20.", Kind: "pitfall"})
	for _, c := range []struct{ query, want string }{
		{"time out", limits.KnowledgeID},
		{"time-out", limits.KnowledgeID},
		{"keep-alive", gateway.KnowledgeID},
		{"keep alive interval", gateway.KnowledgeID},
	} {
		t.Run(c.query, func(t *testing.T) {
			r := e.recall(t, e.arch, knowledge.RecallInput{Query: c.query})
			if len(r.Entries) == 0 || r.Entries[0].ID != c.want {
				t.Fatalf("recall %q: %+v, want %s first", c.query, r.Entries, c.want)
			}
		})
	}
	t.Run("words that make no entry's compound find nothing", func(t *testing.T) {
		e.wantRecalled(t, "giraffe migration", 0)
	})
}

// TestWordsNobodyConfirmedDoNotShapeRecall: recall's typo channel corrects a query word to
// the project's closest known words. It knew every entry's words, candidates included: a
// candidate holding "cloudfrnt" made "cloudfrnt" a known word, not corrected, and another
// part's recall then missed the trusted CloudFront entry; any part could so test whether a
// word was in entries nobody confirmed, which recall must never reveal.
func TestWordsNobodyConfirmedDoNotShapeRecall(t *testing.T) {
	t.Parallel()
	e := setup(t)
	reader := e.scopes["reader"]
	cdn := e.trusted(t, knowledge.LearnInput{Title: "Static assets", Body: "Images are served through CloudFront with a one-day cache.", Kind: "fact"})
	found := func(t *testing.T) {
		t.Helper()
		if r := e.recall(t, reader, knowledge.RecallInput{Query: "cloudfrnt"}); len(r.Entries) != 1 || r.Entries[0].ID != cdn.KnowledgeID {
			t.Fatalf("reader's recall of cloudfrnt: %+v", r)
		}
	}
	known := func(word string) int {
		return e.Count(t, `SELECT count(*) FROM knowledge_word WHERE project_id = $1 AND word = $2`, e.arch.ProjectID, word)
	}
	testfix.Step(t, "an approved entry's body words are known to the typo channel", func(t *testing.T) {
		if known("cloudfront") != 1 {
			t.Fatal("cloudfront is not a known word after the approval")
		}
		found(t)
	})
	testfix.Step(t, "a candidate's words are not, and change nothing recall finds", func(t *testing.T) {
		e.learn(t, knowledge.LearnInput{Title: "Distribution names", Body: "Our cloudfrnt distribution is named after the zyxwvutz bucket.", Kind: "fact"})
		if known("cloudfrnt") != 0 || known("zyxwvutz") != 0 {
			t.Fatal("a candidate's words joined the typo channel")
		}
		found(t)
	})
	testfix.Step(t, "a rejected entry's words are not either", func(t *testing.T) {
		l := e.learn(t, knowledge.LearnInput{Title: "Quarantined hosts", Body: "The qwertzuiop host is quarantined.", Kind: "fact"})
		if _, err := e.k.Reject(context.Background(), e.arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		if known("qwertzuiop") != 0 {
			t.Fatal("a rejected entry's words joined the typo channel")
		}
	})
	testfix.Step(t, "the upgrade takes out the words stored before from unconfirmed entries", func(t *testing.T) {
		// What 000011's trigger stored for the candidate above.
		e.exec(t, `INSERT INTO knowledge_word (project_id, word) VALUES ($1, 'cloudfrnt'), ($1, 'zyxwvutz')`, e.arch.ProjectID)
		up, err := fs.ReadFile(sqlfiles.Migrations(), "000074_knowledge_words_rebuild.up.sql")
		if err != nil {
			t.Fatal(err)
		}
		e.exec(t, string(up))
		if known("cloudfrnt") != 0 || known("zyxwvutz") != 0 || known("cloudfront") != 1 || known("images") != 1 {
			t.Fatal("the rebuild kept a candidate's words or dropped a trusted entry's")
		}
		found(t)
	})
}
