package app_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/testfix"
)

// replicasEnv names how many replicas every end-to-end server is (docs/scale.md,
// "Replicas behind a load balancer"): unset or 1, one in-process server called directly;
// 2 or more, that many in-process servers on the same database behind HAProxy, with
// deploy/replicas/haproxy.cfg (round robin, no stickiness), and the tests call the
// balancer. The suites then pass through a real load balancer, each request to whichever
// replica is next, without a line of them changing.
const replicasEnv = "RELAYROOM_TEST_REPLICAS"

// haproxyConfig is the balancer's configuration, the one deploy/replicas/replicas.sh fills.
const haproxyConfig = "../../deploy/replicas/haproxy.cfg"

// testReplicas reads replicasEnv (1 when unset).
func testReplicas(t testing.TB) int {
	t.Helper()
	v := os.Getenv(replicasEnv)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 9 {
		t.Fatalf("%s=%q: want a count from 1 to 9", replicasEnv, v)
	}
	return n
}

// startReplicas runs n servers with cfg (each on its own loopback port, all with the
// balancer's URL as their public URL unless cfg names one) behind HAProxy, and returns
// the balancer's URL and how to stop everything. Every replica logs to logs.
func startReplicas(t testing.TB, cfg config.Config, logs *syncBuffer, n int) (string, func() error) {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatalf("%s=%d needs haproxy (apt-get install haproxy): %v", replicasEnv, n, err)
	}
	lb := testfix.FreeLoopback(t)
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + lb
	}
	// The balancer (option forwardfor) names the client in X-Forwarded-For, as
	// replicas.sh's replicas trust it: the per-address limits count the test's clients.
	cfg.TrustedProxies = append(slices.Clone(cfg.TrustedProxies), netip.MustParsePrefix("127.0.0.1/32"))
	// One signing key for all, as docs/scale.md tells operators: a download link made by
	// one replica must open on another.
	if cfg.SigningKey == "" {
		cfg.SigningKey = "replicas-test-signing-key-shared-by-every-replica"
	}
	var servers strings.Builder
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop())
		}
		return errors.Join(errs...)
	}
	for i := range n {
		c := cfg
		c.Addr = testfix.FreeLoopback(t)
		fmt.Fprintf(&servers, "    server r%d %s\n    server r%d-open %s backup no-check\n", i+1, c.Addr, i+1, c.Addr)
		_, stop := startOne(t, c, logs)
		// Stopped here too should the start of a later one fail (stop runs once).
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("stop replica %d: %v", i+1, err)
			}
		})
		stops = append(stops, stop)
	}
	tmpl, err := os.ReadFile(haproxyConfig)
	if err != nil {
		t.Fatal(errors.Join(err, stopAll()))
	}
	cfgText := strings.Replace(strings.Replace(string(tmpl), "__BIND__", lb, 1), "__SERVERS__\n", servers.String(), 1)
	// The balancer drops the client's X-Forwarded-For, being the edge. The tests stand for
	// many clients from one machine, as a trusted proxy in front of it would, so theirs is
	// kept (the per-address limit tests name their clients in it).
	const dropForwarded = "    http-request del-header X-Forwarded-For\n"
	if !strings.Contains(cfgText, dropForwarded) {
		t.Fatalf("%s no longer drops the client's X-Forwarded-For as this harness expects", haproxyConfig)
	}
	cfgText = strings.Replace(cfgText, dropForwarded, "", 1)
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(errors.Join(err, stopAll()))
	}
	// -db: in the foreground, a child of the test, stopped with it.
	cmd := exec.Command(haproxy, "-db", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(errors.Join(err, stopAll()))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The balancer goes last: a call in flight on a draining replica is answered through it.
	stops = append(stops, func() error {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		<-exited
		return nil
	})
	base := "http://" + lb
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			err = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal(errors.Join(fmt.Errorf("haproxy at %s not ready after 30 s: %v", base, err), stopAll()))
		}
	}
	var once sync.Once
	var stopErr error
	return base, func() error {
		once.Do(func() { stopErr = stopAll() })
		return stopErr
	}
}

// skipThroughBalancer skips a test about one process (its own connections, its own
// counters, its own log) when the test servers are replicas behind the balancer, where
// that process is one of several and the client's connection is HAProxy's; reason says
// what the test is about one process, and docs/scale.md lists each.
func skipThroughBalancer(t *testing.T, reason string) {
	t.Helper()
	if n := testReplicas(t); n > 1 {
		t.Skipf("%s=%d: per process by nature: %s", replicasEnv, n, reason)
	}
}
