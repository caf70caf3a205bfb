package threads_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/relayroom/relayroom/internal/threads"
)

// TestThreadListByPart: the thread list filtered by a part answers the same threads, in
// the same order, whichever way the statement finds them: by key for a part in at most
// threads.PartThreadsByKey threads (frontend, in 3), by walking the recent-threads index
// for a part in more (backend, in every one of PartThreadsByKey + 5), with and without
// the other filters.
func TestThreadListByPart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	project := e.sc("architect").ProjectID
	n := threads.PartThreadsByKey + 5
	// Threads written as the owner: every third closed, every fifth flagged, each a minute
	// older than the one before; backend takes part in all, frontend in three spread out.
	e.exec(t, `INSERT INTO thread (project_id, id, subject, status, closed_at, needs_human, last_message_at)
		SELECT $1, gen_random_uuid(), 'thread ' || g, CASE WHEN g % 3 = 0 THEN 'closed' ELSE 'open' END,
		  CASE WHEN g % 3 = 0 THEN now() END, g % 5 = 0, now() - g * interval '1 minute'
		FROM generate_series(1, $2::int) g`, project, n)
	e.exec(t, `INSERT INTO participant (project_id, thread_id, member_id)
		SELECT t.project_id, t.id, m.id FROM thread t JOIN membership m ON m.project_id = t.project_id AND m.part = 'backend'
		WHERE t.project_id = $1`, project)
	e.exec(t, `INSERT INTO participant (project_id, thread_id, member_id)
		SELECT t.project_id, t.id, m.id FROM thread t JOIN membership m ON m.project_id = t.project_id AND m.part = 'frontend'
		WHERE t.project_id = $1 AND t.subject IN ('thread 2', 'thread 501', 'thread 1000')`, project)

	// want is the list as the filters define it, computed without the statement under test.
	want := func(t *testing.T, part string, f threads.ThreadFilter) []uuid.UUID {
		t.Helper()
		rows, err := e.DB.Ops.Query(context.Background(), `SELECT t.id FROM thread t
			WHERE t.project_id = $1 AND ($2 = '' OR t.status = $2) AND (NOT $3 OR t.needs_human)
			  AND EXISTS (SELECT 1 FROM participant pa JOIN membership m ON m.project_id = pa.project_id AND m.id = pa.member_id
			              WHERE pa.project_id = t.project_id AND pa.thread_id = t.id AND m.part = $4)
			ORDER BY t.last_message_at DESC, t.id DESC LIMIT $5`, project, f.Status, f.Flagged, part, threads.MaxPeopleThreads)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, c := range []struct {
		name string
		f    threads.ThreadFilter
		min  int // at least this many, so that an empty answer cannot pass
	}{
		{"a part of few threads (looked up by key)", threads.ThreadFilter{Part: "frontend"}, 3},
		{"a part of few threads, closed only", threads.ThreadFilter{Part: "frontend", Status: threads.StatusClosed}, 1},
		{"a part of many threads (the recent index walked)", threads.ThreadFilter{Part: "backend"}, threads.MaxPeopleThreads},
		{"a part of many threads, flagged and open", threads.ThreadFilter{Part: "backend", Status: threads.StatusOpen, Flagged: true}, threads.MaxPeopleThreads},
		{"a part of no thread", threads.ThreadFilter{Part: "reader"}, 0},
		{"a part that does not exist", threads.ThreadFilter{Part: "nobody"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			list := must[[]threads.PersonThread](t)(e.svc.ThreadsForPeople(context.Background(), e.person("Ana"), c.f))
			got := make([]uuid.UUID, len(list))
			for i, th := range list {
				got[i] = th.ID
			}
			exp := want(t, c.f.Part, c.f)
			if len(got) < c.min || !slices.Equal(got, exp) {
				t.Fatalf("%+v: %d threads %v, want %d %v", c.f, len(got), got, len(exp), exp)
			}
		})
	}
}
