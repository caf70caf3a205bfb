package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/pg"
)

// TestIdleThreadsAreClosedByThePeriodicJob proves the service's periodic jobs are wired
// and run: a thread idle for 31 minutes when the server starts is closed by the idle
// backstop, and a fresh one is left open.
func TestIdleThreadsAreClosedByThePeriodicJob(t *testing.T) {
	t.Parallel()
	idle, fresh := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	var d *pg.DB
	s := startServerWith(t, func(ctx context.Context, db *pg.DB, res admin.Result) {
		project := res.Projects["escalations"].ID
		err := db.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO thread (project_id, id, subject, last_message_at, created_at)
				VALUES ($1, $2, 'stale', now() - interval '31 minutes', now() - interval '40 minutes'),
				       ($1, $3, 'fresh', now(), now())`, project, idle, fresh)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	d = openSeeded(t, s)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var idleStatus, freshStatus string
		err := d.Operator(context.Background(), func(tx *pg.Tx) error {
			if err := tx.QueryRow(context.Background(), "SELECT status FROM thread WHERE id = $1", idle).Scan(&idleStatus); err != nil {
				return err
			}
			return tx.QueryRow(context.Background(), "SELECT status FROM thread WHERE id = $1", fresh).Scan(&freshStatus)
		})
		if err != nil {
			t.Fatal(err)
		}
		if freshStatus != "open" {
			t.Fatalf("a fresh thread was closed: %s", freshStatus)
		}
		if idleStatus == "closed" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle thread is still %q 30 s after start: the periodic job did not run", idleStatus)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
