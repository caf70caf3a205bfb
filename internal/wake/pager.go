package wake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pager is the client side of `relayroom pager`: it long-polls the server with an agent
// key and runs a command once per wake, acknowledging the wake when the command exits 0.
// A wake whose command fails (or that could not be acknowledged) is replayed by the
// server after its lease: delivery is at least once.
type Pager struct {
	BaseURL string // the server, e.g. http://localhost:48801
	Key     string // the agent key (RELAYROOM_AGENT_KEY)
	Exec    string // run with sh -c; the wake is on stdin and in RELAYROOM_* variables
	Wait    time.Duration
	Client  *http.Client
	Log     *slog.Logger
	Stdout  io.Writer
	Stderr  io.Writer
	// MaxBackoff caps the reconnect delay after network errors (default 30 s).
	MaxBackoff time.Duration
	// KillGrace is how long a running command gets after SIGTERM on shutdown (default 10 s).
	KillGrace time.Duration
}

// ErrUnauthorized means the server refused the agent key: retrying will not help.
var ErrUnauthorized = errors.New("the server refused the agent key (RELAYROOM_AGENT_KEY)")

// Run pages until ctx ends (SIGINT/SIGTERM), then returns nil; it returns an error only
// when the key is refused.
func (p *Pager) Run(ctx context.Context) error {
	if p.Log == nil {
		p.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if p.Wait <= 0 {
		p.Wait = 25 * time.Second
	}
	if p.Client == nil {
		p.Client = &http.Client{}
	}
	if p.Stdout == nil {
		p.Stdout = os.Stdout
	}
	if p.Stderr == nil {
		p.Stderr = os.Stderr
	}
	maxBackoff := cmpOr(p.MaxBackoff, 30*time.Second)
	base := strings.TrimRight(p.BaseURL, "/")
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		w, err := p.next(ctx, base)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrUnauthorized) {
			return err
		}
		if err != nil {
			d := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
			p.Log.Warn("pager: server unreachable, retrying", "error", err.Error(), "in", d.Round(time.Millisecond).String())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(d):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = 500 * time.Millisecond
		if w == nil {
			continue // the long poll ended without a wake
		}
		p.handle(ctx, base, w)
	}
	return nil
}

func (p *Pager) next(ctx context.Context, base string) (*wakeMsg, error) {
	secs := int(p.Wait / time.Second)
	rctx, cancel := context.WithTimeout(ctx, p.Wait+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/api/wakes/next?wait="+strconv.Itoa(secs), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Key)
	resp, err := p.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var w Wake
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, fmt.Errorf("bad wake from server: %w", err)
		}
		return &wakeMsg{Wake: w, raw: body}, nil
	case http.StatusNoContent:
		return nil, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, ErrUnauthorized
	default:
		return nil, fmt.Errorf("server answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
}

type wakeMsg struct {
	Wake
	raw []byte
}

// Env is the environment a wake's command gets, besides the pager's own.
func (w Wake) Env() []string {
	return []string{
		"RELAYROOM_WAKE_ID=" + w.ID.String(),
		"RELAYROOM_PROJECT_ID=" + w.ProjectID.String(),
		"RELAYROOM_PART=" + w.Part,
		"RELAYROOM_WAKE_COUNT=" + strconv.Itoa(w.Count),
		"RELAYROOM_WAKE_SOURCES=" + strings.Join(w.Sources, ","),
		"RELAYROOM_THREAD_IDS=" + strings.Join(w.ThreadIDs, ","),
		"RELAYROOM_WAKE_URGENT=" + strconv.FormatBool(w.Urgent),
		"RELAYROOM_WAKE_ATTEMPT=" + strconv.Itoa(w.Attempt),
	}
}

func (p *Pager) handle(ctx context.Context, base string, w *wakeMsg) {
	log := p.Log.With("wake", w.ID.String(), "part", w.Part, "count", w.Count, "attempt", w.Attempt)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", p.Exec)
	cmd.Stdin = bytes.NewReader(append(w.raw, '\n'))
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	cmd.Env = append(append(os.Environ(), w.Env()...), "RELAYROOM_WAKE_JSON="+string(w.raw))
	// On shutdown the command gets SIGTERM and a grace period, not an immediate kill.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = cmpOr(p.KillGrace, 10*time.Second)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		log.Warn("pager: command failed; the wake will be replayed after its lease", "error", err.Error())
		return
	}
	log.Info("pager: command done", "duration_ms", time.Since(start).Milliseconds())
	// Acknowledge, retrying briefly: an unacknowledged wake is replayed, running the
	// command again.
	for i := 0; i < 5; i++ {
		err := p.ack(context.WithoutCancel(ctx), base, w.ID.String())
		if err == nil {
			return
		}
		log.Warn("pager: ack failed", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(i+1) * time.Second):
		}
	}
}

func (p *Pager) ack(ctx context.Context, base, id string) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, base+"/api/wakes/"+id+"/ack", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.Key)
	resp, err := p.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict:
		return nil // gone or replayed elsewhere: nothing to retry
	default:
		return fmt.Errorf("ack answered %d", resp.StatusCode)
	}
}
