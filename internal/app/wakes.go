package app

import (
	"context"
	"time"

	"github.com/relayroom/relayroom/internal/jobs"
	"github.com/relayroom/relayroom/internal/threads"
)

// opsPoolSize is the owner's pool: River (its LISTEN connection, fetches, completer,
// leader election and maintenance), the wake listener, sweeps and webhook deliveries.
const opsPoolSize = 16

// SecretKeyEnv names the server key that seals webhook secrets (32 bytes, hex or base64).
const SecretKeyEnv = "RELAYROOM_SECRET_KEY"

// periodicJobs are the service's periodic jobs besides the wake sweep and clean-up (which
// wake.Service.RegisterJobs adds). Each runs once across all replicas.
func (a *App) periodicJobs() []jobs.Periodic {
	return []jobs.Periodic{
		{
			// The backstop for threads nobody closed: 30 minutes without a message.
			Name: "threads_close_idle", Every: time.Minute, RunOnStart: true,
			Run: func(ctx context.Context) error {
				n, err := a.threads.CloseIdle(ctx, threads.DefaultIdle)
				if n > 0 {
					a.log.InfoContext(ctx, "closed idle threads", "count", n)
				}
				return err
			},
		},
		{
			// Expired knowledge is already excluded at read time; this retires it.
			Name: "knowledge_expire", Every: 5 * time.Minute, RunOnStart: true,
			Run: clean(a.knowledge.ExpireDue),
		},
		{
			// Idempotency keys are remembered 24 h (older ones are already treated as new).
			Name: "idempotency_expire", Every: 10 * time.Minute, RunOnStart: true,
			Run: clean(a.idempotency.DeleteExpired),
		},
		{
			// Desk note keys are remembered 24 h (older ones are already treated as new).
			Name: "desk_note_keys_expire", Every: 10 * time.Minute, RunOnStart: true,
			Run: clean(a.desk.DeleteExpiredNoteKeys),
		},
		{
			// Failed-authentication counters of ended windows (docs/auth-limits.md).
			Name: "auth_throttle_prune", Every: time.Minute,
			Run: clean(a.throttle.Prune),
		},
		{
			// Ended sessions, authorization requests and tokens; idle OAuth clients (docs/auth.md).
			Name: "oauth_prune", Every: 10 * time.Minute, RunOnStart: true,
			Run: clean(a.oauth.Prune),
		},
		{
			// Memory written while the embedder was slow or down, or before the embedder
			// changed, is embedded here; reads use the lexical search meanwhile.
			Name: "memory_embed_backlog", Every: 30 * time.Second, RunOnStart: true,
			// Batch after batch until the backlog is empty, for at most embedRunFor: one
			// batch a tick drained 500 entries per 30 s (17/s), far below the rate
			// write_memory stores entries (hundreds a second) after an embedder outage.
			Run: func(ctx context.Context) error {
				until := time.Now().Add(embedRunFor)
				for time.Now().Before(until) {
					n, err := a.rooms.EmbedPending(ctx, embedBatch)
					if err != nil || n < embedBatch {
						return err
					}
				}
				return nil
			},
		},
	}
}

// embedBatch bounds one run of the embedding backlog, so a large re-embedding proceeds in
// steps and never holds a job for long. The builtin sentence encoder takes about 16 ms of
// CPU for a 40-word entry (docs/embeddings.md): 100 entries are 2 s on an idle core and
// stay well inside the job's 30 s timeout on a loaded one, where a batch that times out
// stores nothing.
const embedBatch = 100

// embedRunFor bounds one run of the embedding backlog (the job runs every 30 s and ends
// well before the next is due).
const embedRunFor = 20 * time.Second

// clean is a clean-up job whose count of rows removed nobody reads.
func clean(f func(context.Context) (int64, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := f(ctx)
		return err
	}
}
