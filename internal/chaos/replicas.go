package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relayroom/relayroom/internal/loadtest"
)

// killedReplica is the replica the attack kills (1-based, as replicas.sh numbers them).
const killedReplica = 2

// replicaSet is Replicas `relayroom serve` behind HAProxy, run by deploy/replicas/replicas.sh
// in dir.
type replicaSet struct {
	b    *bench
	dir  string
	base string // the balancer's URL
}

// script runs replicas.sh with args and returns its standard output (its progress goes
// to the run's progress output). The replicas get the attacks' shutdown timeout.
func (r *replicaSet) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{r.b.o.ReplicasScript}, args...)...)
	cmd.Env = append(os.Environ(), "RELAYROOM_SHUTDOWN_TIMEOUT="+serverShutdown.String())
	cmd.Stderr = r.b.o.Progress
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", r.b.o.ReplicasScript, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// port is replica i's loopback port.
func (r *replicaSet) port(i int) (string, error) {
	p, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("replica%d.port", i)))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(p)), nil
}

// kill sends SIGKILL to replica i, as `replicas.sh kill` does (from here, so that the
// moment of the signal is known to the millisecond, not after a shell's start), and waits
// until its port refuses connections: the process is gone (it is not this process's
// child, so it cannot be waited for).
func (r *replicaSet) kill(i int) error {
	port, err := r.port(i)
	if err != nil {
		return err
	}
	pidFile := filepath.Join(r.dir, fmt.Sprintf("replica%d.pid", i))
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 replica %d (pid %d): %w", i, pid, err)
	}
	// Gone: `replicas.sh restart` starts it again only when no live pid is recorded.
	if err := os.Remove(pidFile); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		if err := c.Close(); err != nil {
			return err
		}
	}
	return fmt.Errorf("replica %d still accepts connections 10 s after kill -9", i)
}

// killReplicaUnderWrites runs the write tools through HAProxy in front of Replicas
// replicas, SIGKILLs one replica after KillAfter, goes on writing while the balancer
// finds it gone (ReplicaDown), starts it again and goes on for KillAfter more; then it
// retries every write whose answer was lost with the same key and counts the markers
// in the database. A write that fails is one in flight at the kill (sent before the
// killed replica's port refused connections), or one sent after it: the second kind is
// what the balancer must prevent (a connection refused is retried on another replica).
func killReplicaUnderWrites(ctx context.Context, b *bench, _ *loadtest.Server) (Finding, error) {
	o := b.o
	if _, err := exec.LookPath("haproxy"); err != nil {
		return Finding{Skipped: "haproxy is not installed (apt-get install haproxy)"}, nil
	}
	r := &replicaSet{b: b, dir: filepath.Join(o.LogDir, "g-replicas")}
	base, err := r.script(ctx, "start", r.dir, strconv.Itoa(o.Replicas), b.dbURL, o.Bin)
	if err != nil {
		return Finding{}, err
	}
	r.base = base
	defer func() {
		if _, err := r.script(context.WithoutCancel(ctx), "stop", r.dir); err != nil {
			b.say("stopping the replicas: %v", err)
		}
	}()
	client := loadtest.NewClient(o.WriteConns, 30*time.Second, nil)
	defer client.Close()
	env, err := loadtest.NewEnv(client, r.base, b.fixture)
	if err != nil {
		return Finding{}, err
	}
	if err := env.Prepare(ctx, o.WriteConns); err != nil {
		return Finding{}, err
	}
	// The markers have the shape countMarkers reads: prefix, round (one: 0), worker, sequence.
	prefix := fmt.Sprintf("zqmark-%d-", time.Now().UnixMilli()%1_000_000_000)

	startAt := time.Now()
	ws := startWriters(ctx, env, o.WriteConns, prefix+"0-")
	time.Sleep(o.KillAfter)
	killAt := time.Now()
	kerr := r.kill(killedReplica)
	// The process dies somewhere between the signal and its port refusing connections: a
	// call started in that span may have been in flight on it.
	deadAt := time.Now()
	var restartAt, backAt time.Time
	var rerr error
	if kerr == nil {
		time.Sleep(o.ReplicaDown)
		restartAt = time.Now()
		_, rerr = r.script(ctx, "restart", r.dir, strconv.Itoa(killedReplica))
		backAt = time.Now()
		if rerr == nil {
			time.Sleep(o.KillAfter)
		}
	}
	ws.halt()
	stopAt := time.Now()
	writes := ws.wait()
	if err := errors.Join(kerr, rerr); err != nil {
		return Finding{}, err
	}

	// What the clients saw, before the retries change the states.
	var inFlight, inFlightFailed, afterFailed, afterSent, afterAcked, clientReplays int
	afterFailures := map[string]int{}
	for _, wr := range writes {
		if wr.conns > 1 {
			clientReplays++
		}
		switch {
		case wr.end.Before(killAt):
		case wr.start.Before(deadAt):
			inFlight++
			if wr.state != acked {
				inFlightFailed++
			}
		default:
			afterSent++
			if wr.state == acked {
				afterAcked++
			} else {
				afterFailed++
				afterFailures[wr.detail]++
			}
		}
	}
	rs := retryLost(ctx, writes)
	found, err := countMarkers(ctx, b.dbURL, prefix)
	if err != nil {
		return Finding{}, err
	}
	au := audit(found, writes)
	measured := fmt.Sprintf("%d writes through HAProxy in %v (%s): %d acknowledged, %d refused, %d answers lost. "+
		"Replica %d got SIGKILL after %v with %d calls in flight on all replicas (its port refused connections %v later); %d of those calls failed; %d calls sent again by the client itself (Go's HTTP client replays a request with an Idempotency-Key whose reused connection closed unanswered); "+
		"%d writes sent after the kill (while it was down for %v, restarting for %v and back for %v): %d acknowledged, %d failed%s. "+
		"The %d lost answers retried with the same key: %d acknowledged, %d refused, %d failed. "+
		"In the database: acknowledged writes lost %d, duplicates %d (%d of them from retries), writes neither acknowledged nor stored %d",
		len(writes), round(stopAt.Sub(startAt)), toolCounts(writes), rs.ackedBefore, rs.refusedBefore, rs.lost,
		killedReplica, round(killAt.Sub(startAt)), inFlight, deadAt.Sub(killAt).Round(time.Millisecond), inFlightFailed, clientReplays,
		afterSent, round(restartAt.Sub(killAt)), round(backAt.Sub(restartAt)), round(stopAt.Sub(backAt)), afterAcked, afterFailed, failureList(afterFailures),
		rs.lost, rs.acked, rs.refused, rs.failed,
		au.ackedLost, au.dups, au.dupsOfRetries, au.lostUnacked)
	if len(rs.refusals) > 0 {
		measured += "; refusals: " + counts(rs.refusals)
	}
	return Finding{
		Did: fmt.Sprintf("%d replicas behind HAProxy (deploy/replicas, round robin, no stickiness); %d connections calling the write tools (%s) through it, each write with an Idempotency-Key and a unique marker; SIGKILL to replica %d after %v, restarted %v later, writes go on %v after; then retry every unanswered write",
			o.Replicas, o.WriteConns, toolNames(writeTools(env)), killedReplica, o.KillAfter, o.ReplicaDown, o.KillAfter),
		Measured: measured,
		Target:   "acknowledged writes lost 0, duplicates 0, no retry failed; no write sent after the kill fails (only calls in flight at the kill may)",
		Held:     au.holds() && rs.failed == 0 && afterFailed == 0,
	}, nil
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// failureList is the failures in parentheses, counted by kind, or nothing when there are none.
func failureList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return " (" + counts(m) + ")"
}
