package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/testfix"
)

// The cast: architect (write) and reader (read) in project one, peter in project two.
var cast = []string{"architect", "reader, access: read"}

type env struct {
	*testfix.Bundle
	d      *pg.DB
	k      *knowledge.Service
	res    admin.Result
	scopes map[string]tenancy.Scope
}

func setup(t testing.TB) *env {
	t.Helper()
	b := testfix.Seed(t, testfix.TwoProjects(cast...))
	k, err := knowledge.New(knowledge.Deps{DB: b.DB, Detector: testfix.Detector(t), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &env{Bundle: b, d: b.DB, res: b.Result, k: k, scopes: b.CastScopes(t, cast...)}
}

func (e *env) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	e.Exec(t, sql, args...)
}

func wantErr(t testing.TB, err error, code apperr.Code, reason string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != code || (reason != "" && e.Reason != reason) {
		t.Fatalf("want %s/%s, got %v", code, reason, err)
	}
}

func TestLearnIsACandidateUntilAPersonApproves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
	l, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Deploys need the rollback flag", Body: "Always pass --rollback to the deploy script on Fridays.", Kind: "procedure"})
	if err != nil || l.Status != "candidate" {
		t.Fatalf("learn: %+v %v", l, err)
	}
	r, err := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "deploy rollback"})
	if err != nil || len(r.Entries) != 0 {
		t.Fatalf("a candidate was recalled: %+v %v", r, err)
	}
	d, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
	if err != nil || d.Status != "trusted" {
		t.Fatalf("approve: %+v %v", d, err)
	}
	_, err = e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
	wantErr(t, err, apperr.Conflict, "already_decided")
	// Another project's id answers not found.
	_, err = e.k.Approve(ctx, e.scopes["peter"].ProjectID, uuid.MustParse(l.KnowledgeID), "alice")
	wantErr(t, err, apperr.NotFound, "")

	// A read-only part may recall but not learn.
	r, err = e.k.Recall(ctx, e.scopes["reader"], knowledge.RecallInput{Query: "deploy rollback"})
	if err != nil || len(r.Entries) != 1 || r.Entries[0].ID != l.KnowledgeID || r.QueryID == "" {
		t.Fatalf("recall after approval: %+v %v", r, err)
	}
	_, err = e.k.Learn(ctx, e.scopes["reader"], knowledge.LearnInput{Title: "x", Body: "y", Kind: "fact"})
	wantErr(t, err, apperr.Forbidden, "write_access_required")
	// Another project recalls nothing of it.
	if r2, _ := e.k.Recall(ctx, e.scopes["peter"], knowledge.RecallInput{Query: "deploy rollback"}); len(r2.Entries) != 0 {
		t.Fatalf("recall crossed projects: %+v", r2)
	}
	// kind filter.
	if r3, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "deploy rollback", Kind: ptr("pitfall")}); len(r3.Entries) != 0 {
		t.Fatalf("kind filter: %+v", r3)
	}

	// recall_used: only ids the query returned, once each.
	if err := e.k.RecallUsed(ctx, e.scopes["reader"], r.QueryID, l.KnowledgeID); err != nil {
		t.Fatal(err)
	}
	err = e.k.RecallUsed(ctx, e.scopes["reader"], r.QueryID, l.KnowledgeID)
	wantErr(t, err, apperr.Conflict, "already_reported")
	err = e.k.RecallUsed(ctx, e.scopes["reader"], r.QueryID, uuid.NewString())
	wantErr(t, err, apperr.Invalid, "not_returned")
	err = e.k.RecallUsed(ctx, e.scopes["peter"], r.QueryID, l.KnowledgeID)
	wantErr(t, err, apperr.NotFound, "query_not_found")
	// A query belongs to the part that ran it: another part of the same project cannot
	// report its use (it would inflate the hit rate), and learns nothing of it.
	r7, err := e.k.Recall(ctx, e.scopes["reader"], knowledge.RecallInput{Query: "deploy rollback"})
	if err != nil || len(r7.Entries) != 1 {
		t.Fatalf("reader's recall: %+v %v", r7, err)
	}
	err = e.k.RecallUsed(ctx, arch, r7.QueryID, l.KnowledgeID)
	wantErr(t, err, apperr.NotFound, "query_not_found")
	empty, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "zzqqxx unrelated"})
	err = e.k.RecallUsed(ctx, arch, empty.QueryID, l.KnowledgeID)
	wantErr(t, err, apperr.Invalid, "not_returned")
	if r4, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "rollback flag"}); len(r4.Entries) != 1 {
		t.Fatalf("recall by title words: %+v", r4)
	}
	// A typo still finds it (the title's trigrams), an unrelated word does not.
	if r5, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "rollbak"}); len(r5.Entries) != 1 {
		t.Fatalf("recall with a typo: %+v", r5)
	}
	if r6, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "kubernetes"}); len(r6.Entries) != 0 {
		t.Fatalf("recall of an unrelated word: %+v", r6)
	}
	// A lone typo of a word that occurs only in an entry's body finds it too (the body's
	// words by trigram), and an unrelated misspelling still finds nothing.
	cdn, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Static assets", Body: "Images are served through CloudFront with a one-day cache.", Kind: "fact"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(cdn.KnowledgeID), "alice"); err != nil {
		t.Fatal(err)
	}
	if r8, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "cloudfrnt"}); len(r8.Entries) != 1 || r8.Entries[0].ID != cdn.KnowledgeID {
		t.Fatalf("recall of a body word with a typo: %+v", r8)
	}
	if r9, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "kubernets"}); len(r9.Entries) != 0 {
		t.Fatalf("recall of an unrelated misspelling: %+v", r9)
	}
	h, err := e.k.RecallHitRate(ctx, arch, time.Now().Add(-time.Hour))
	if err != nil || h.Returned != 5 || h.Used != 1 || h.Rate != 0.2 {
		t.Fatalf("hit rate: %+v %v", h, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestContradictionsDemoteAndExpiryIsHonouredAtReadTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
	l, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Cache TTL is five minutes", Body: "The edge cache keeps pages for five minutes.", Kind: "fact"})
	if _, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice"); err != nil {
		t.Fatal(err)
	}
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
		if r, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "cache TTL"}); len(r.Entries) != 0 {
			t.Fatalf("a demoted entry was recalled: %+v", r)
		}
	})
	t.Run("contradicting a demoted entry answers that it is demoted", func(t *testing.T) {
		if c := contradict(); c.Status != "demoted" || c.Confidence != 0.5 {
			t.Fatalf("second contradiction: %+v", c)
		}
	})
	t.Run("a person can approve a demoted entry again", func(t *testing.T) {
		if _, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		if r, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "cache TTL"}); len(r.Entries) != 1 {
			t.Fatalf("re-approved entry not recalled: %+v", r)
		}
	})
	t.Run("a candidate is demoted by a contradiction too", func(t *testing.T) {
		c, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Deploys happen on Fridays", Body: "We deploy every Friday afternoon.", Kind: "fact"})
		l.KnowledgeID = c.KnowledgeID
		if got := contradict(); got.Status != "demoted" {
			t.Fatalf("candidate contradiction: %+v", got)
		}
	})
	t.Run("the penalty is read from knowledge_config on every decision", func(t *testing.T) {
		l2, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Queue size limit", Body: "Queues hold at most 1000 jobs.", Kind: "fact"})
		if _, err := e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l2.KnowledgeID), "alice"); err != nil {
			t.Fatal(err)
		}
		e.exec(t, `UPDATE project SET knowledge_config = knowledge_config || '{"contradictionPenalty":0.9}'::jsonb WHERE id = $1`, arch.ProjectID)
		l.KnowledgeID = l2.KnowledgeID
		if c := contradict(); c.Status != "demoted" || c.Confidence != 0.1 {
			t.Fatalf("config penalty not applied: %+v", c)
		}
	})

	// Expiry: an expired trusted entry is excluded before the sweep, then retired by it.
	l3, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Release freeze", Body: "No releases during the freeze week.", Kind: "decision", ExpiresAt: ptr(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	e.k.Approve(ctx, arch.ProjectID, uuid.MustParse(l3.KnowledgeID), "alice")
	if r, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "release freeze"}); len(r.Entries) != 1 {
		t.Fatalf("unexpired entry not recalled: %+v", r)
	}
	e.exec(t, "UPDATE knowledge SET expires_at = now() - interval '1 second' WHERE id = $1", uuid.MustParse(l3.KnowledgeID))
	if r, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "release freeze"}); len(r.Entries) != 0 {
		t.Fatalf("expired entry recalled: %+v", r)
	}
	if n, err := e.k.ExpireDue(ctx); err != nil || n != 1 {
		t.Fatalf("ExpireDue: %d %v", n, err)
	}
	_, err = e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "x", Body: "y", Kind: "fact", ExpiresAt: ptr(time.Now().Add(-time.Hour))})
	wantErr(t, err, apperr.Invalid, "")
}

func TestNearDuplicatesAreLinkedAndRedactionRunsOnEveryWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
	a, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Run migrations before deploy", Body: "Run make migrate before every deploy of the API.", Kind: "procedure"})
	b, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Run migrations before deploy!", Body: "Run make migrate before every deploy of the API", Kind: "procedure"})
	if err != nil || b.DuplicateOf == nil || *b.DuplicateOf != a.KnowledgeID {
		t.Fatalf("near-duplicate not linked: %+v %v", b, err)
	}
	c, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Frontend colours", Body: "Use the palette tokens, never hex codes.", Kind: "fact"})
	if c.DuplicateOf != nil {
		t.Fatalf("unrelated entry linked: %+v", c)
	}

	key, _, _ := auth.Generate(auth.AgentKeyPrefix)
	l, err := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "The staging key", Body: "Use " + key + " for staging, and the ticket ACME-1234.", Kind: "fact"})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := e.k.List(ctx, arch.ProjectID, "candidate", 10)
	var stored string
	for _, r := range list {
		if r.ID.String() == l.KnowledgeID {
			stored = r.Body
		}
	}
	if strings.Contains(stored, key) || !strings.Contains(stored, secrets.MarkerPrefix) {
		t.Fatalf("secret stored: %q", stored)
	}
	// A project rule applies too, and an unusable rule refuses the write.
	e.exec(t, `UPDATE project SET settings = settings || '{"redactionRules":[{"name":"ticket","pattern":"ACME-[0-9]+"}]}'::jsonb WHERE id = $1`, arch.ProjectID)
	l2, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Tickets", Body: "See ACME-1234 for the details of it.", Kind: "fact"})
	list, _ = e.k.List(ctx, arch.ProjectID, "candidate", 10)
	for _, r := range list {
		if r.ID.String() == l2.KnowledgeID && strings.Contains(r.Body, "ACME-1234") {
			t.Fatalf("project rule not applied: %q", r.Body)
		}
	}
	_, err = e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "Only a key", Body: key, Kind: "fact"})
	wantErr(t, err, apperr.Invalid, "empty_after_redaction")
	e.exec(t, `UPDATE project SET settings = settings || '{"redactionRules":[{"name":"bad","pattern":"("}]}'::jsonb WHERE id = $1`, arch.ProjectID)
	_, err = e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "t", Body: "b", Kind: "fact"})
	wantErr(t, err, apperr.Conflict, "redaction_unresolvable")
}

// TestNearDuplicateQueriesAgree: the near-duplicate check's two forms, rr_near_duplicate
// (owner's rights, the trigram index; plain PostgreSQL) and the request role's query
// (Citus, after the transaction wrote), find the same entry or none.
func TestNearDuplicateQueriesAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
	for _, in := range []knowledge.LearnInput{
		{Title: "Run migrations before deploy", Body: "Run make migrate before every deploy of the API.", Kind: "procedure"},
		{Title: "Run migrations before each deploy", Body: "Run make migrate before each deploy of the web API.", Kind: "procedure"},
		{Title: "Frontend colours", Body: "Use the palette tokens, never hex codes.", Kind: "fact"},
	} {
		if _, err := e.k.Learn(ctx, arch, in); err != nil {
			t.Fatal(err)
		}
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

// TestNearDuplicateReadsTheTitleIndex: learn's near-duplicate check in a project of a
// few thousand entries of ordinary words reads the title trigram index, not every live
// entry of the project (a sequential scan, or knowledge_review_idx and a filter, computed
// similarity() against each title: 100-155 ms a learn under load, docs/performance.md).
func TestNearDuplicateReadsTheTitleIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
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
			// This transaction's scans of the table and its indexes, before and after (the
			// counts of the connection's earlier transactions may not be flushed yet).
			const scans = `SELECT pg_stat_get_xact_numscans('knowledge'::regclass),
				pg_stat_get_xact_numscans('knowledge_live_trgm_idx'::regclass),
				pg_stat_get_xact_numscans('knowledge_review_idx'::regclass)`
			var before, after [3]int64
			err := e.d.InTenant(ctx, arch.Tenant(), func(tx *pg.Tx) error {
				if err := tx.QueryRow(ctx, scans).Scan(&before[0], &before[1], &before[2]); err != nil {
					return err
				}
				_, err := db.New().KnowledgeFindNearDuplicate(ctx, tx, db.KnowledgeFindNearDuplicateParams{
					Title: title, MinTitle: 0.6, Text: title + " and a body", MinText: 0.8})
				if err != nil && !pg.IsNoRows(err) {
					return err
				}
				return tx.QueryRow(ctx, scans).Scan(&after[0], &after[1], &after[2])
			})
			if err != nil {
				t.Fatal(err)
			}
			seq, titleIndex, review := after[0]-before[0], after[1]-before[1], after[2]-before[2]
			if seq != 0 || titleIndex != 1 || review != 0 {
				t.Fatalf("the near-duplicate check made %d sequential scans, %d of the title index and %d of the review index, want 0, 1 and 0", seq, titleIndex, review)
			}
		})
	}
}

func TestCIConfirmsOverHTTPWithItsProjectToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
	l, _ := e.k.Learn(ctx, arch, knowledge.LearnInput{Title: "CI pipeline caches go modules", Body: "The pipeline caches the module download directory.", Kind: "fact"})
	tok, err := e.k.IssueCIToken(ctx, arch.ProjectID)
	if err != nil || !strings.HasPrefix(tok, auth.CITokenPrefix) {
		t.Fatalf("token %q %v", tok, err)
	}
	other, _ := e.k.IssueCIToken(ctx, e.scopes["peter"].ProjectID)
	if n := countRows(t, e, "SELECT count(*) FROM ci_token WHERE secret_hash = sha256($1::bytea)", []byte(tok)); n != 1 {
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
	pid := arch.ProjectID.String()
	if code, _ := post(pid, l.KnowledgeID, ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := post(pid, l.KnowledgeID, mistype(tok)); code != 401 {
		t.Fatalf("mistyped token: %d", code)
	}
	if code, _ := post(pid, l.KnowledgeID, other); code != 401 {
		t.Fatalf("another project's token: %d", code)
	}
	if code, _ := post(e.scopes["peter"].ProjectID.String(), l.KnowledgeID, other); code != 404 {
		t.Fatalf("another project's entry: %d", code)
	}
	code, body := post(pid, l.KnowledgeID, tok)
	if code != 200 || body["status"] != "trusted" || body["confidence"] != 0.9 {
		t.Fatalf("confirm: %d %v", code, body)
	}
	if code, _ := post(pid, l.KnowledgeID, tok); code != 409 {
		t.Fatalf("second confirm: %d", code)
	}
	if r, _ := e.k.Recall(ctx, arch, knowledge.RecallInput{Query: "pipeline caches modules"}); len(r.Entries) != 1 {
		t.Fatalf("CI-confirmed entry not recalled: %+v", r)
	}
}

func countRows(t testing.TB, e *env, sql string, args ...any) int {
	t.Helper()
	return e.Count(t, sql, args...)
}

// TestRecallNeverScansBeyondItsProject reads the plan of the recall query: it must use
// the project-keyed trigram index and never a sequential scan of the table, so other
// projects' entries (and candidates) are never read.
func TestRecallNeverScansBeyondItsProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	arch := e.scopes["architect"]
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
		rows, err := tx.Query(ctx, "EXPLAIN "+recallBody(t, e), arch.ProjectID, "deploy rollback", "deploy rollback", nil, float32(0.3), int32(5), time.Now(), int32(60))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, line)
		}
		return rows.Err()
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
	var n int
	err = e.d.Operator(ctx, func(tx *pg.Tx) error {
		return tx.QueryRow(ctx, "SELECT count(*) FROM rr_recall('deploy rollback', 'deploy rollback', NULL, 0, 100, now())").Scan(&n)
	})
	if err != nil || n != 0 {
		t.Fatalf("rr_recall without a tenant returned %d rows (%v)", n, err)
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
	// The function runs its query with EXECUTE … USING (so that Citus can route it and each
	// call is planned with its values): the query is the text between the $q$ quotes, its
	// parameters the project, then the function's arguments, then each channel's cap.
	start, end := strings.Index(src, "$q$"), strings.LastIndex(src, "$q$")
	if start < 0 || end <= start {
		t.Fatalf("rr_recall no longer runs one EXECUTE'd query:\n%s", src)
	}
	src = src[start+3 : end]
	// Typed, as the USING values are.
	for i, typ := range []string{"uuid", "text", "text", "text", "real", "integer", "timestamptz", "integer"} {
		src = regexp.MustCompile(fmt.Sprintf(`\$%d\b`, i+1)).ReplaceAllString(src, fmt.Sprintf("$$%d::%s", i+1, typ))
	}
	return src
}

// mistype changes a credential's last character to a different one: a plain "+x" is the
// same credential one time in 62.
func mistype(s string) string {
	if s[len(s)-1] == 'x' {
		return s[:len(s)-1] + "y"
	}
	return s[:len(s)-1] + "x"
}
