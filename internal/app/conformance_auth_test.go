package app_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayroom/relayroom/internal/testfix"
)

// TestAuthorizationServerConformance runs the official suite's authorization-server
// scenarios against the issuer, in one run (the grant scenario reads the metadata the
// first one fetched, so it cannot run alone): the metadata document, and the
// authorization code grant with PKCE and resource, for which the suite prints the
// authorization URL and waits on its own loopback callback. The person's browser opens that URL, signs
// in, consents and is sent to the callback, as someone running the suite by hand would.
// That browser is headless Chromium (chromium_test.go), so the suite's grant is driven
// through a real browser's form posts, cookies and redirect.
// Every check must succeed: a warning (client ID metadata documents not advertised) or a
// skip counts as a failure here.
func TestAuthorizationServerConformance(t *testing.T) {
	t.Parallel()
	node, suite := conformanceSuite(t)
	ctx := headlessChromium(t)
	s := startServerFile(t, signInDemo, nil)
	t.Run("authorization-server-metadata-endpoint and authorization-code-grant", func(t *testing.T) {
		// The suite's callback listens on the port it is given: one free a moment ago.
		_, port, err := net.SplitHostPort(testfix.FreeLoopback(t))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(s.base+"/register", "application/json", strings.NewReader(
			`{"redirect_uris":["http://127.0.0.1:`+port+`/callback"],"client_name":"conformance","token_endpoint_auth_method":"none"}`))
		if err != nil {
			t.Fatal(err)
		}
		var reg struct {
			ClientID string `json:"client_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&reg)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("register: %d %v", resp.StatusCode, err)
		}
		lines := make(chan string)
		type result struct {
			checks []conformanceCheck
			err    error
		}
		done := make(chan result, 1)
		go func() {
			checks, err := runSuite(node, suite, "", []string{"authorization", "--url", s.base,
				"--client-id", reg.ClientID, "--port", port, "--resource", s.base + "/api/mcp"}, lines)
			done <- result{checks, err}
		}()
		opened := false
		var output strings.Builder
		for line := range lines {
			output.WriteString(line + "\n")
			if opened || !strings.HasPrefix(line, s.base+"/authorize?") {
				continue
			}
			opened = true
			// The suite prints the URL as it starts listening: the browser is sent to
			// the callback once it accepts connections. Failures are reported without
			// stopping, so that the suite's output keeps being read until it ends.
			if err := waitListening(port); err != nil {
				t.Errorf("the suite's callback: %v", err)
				continue
			}
			if err := chromiumConsent(ctx, line, "Backend"); err != nil {
				t.Errorf("sign in and consent in the browser: %v", err)
				continue
			}
			if err := waitLocation(ctx, "http://127.0.0.1:"+port+"/callback?"); err != nil {
				t.Error(err)
			}
		}
		r := <-done
		if !opened {
			t.Fatalf("the suite printed no authorization URL (%v)", r.err)
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		ran := map[string]bool{}
		for _, c := range r.checks {
			ran[c.ID] = true
			if c.Status != "SUCCESS" {
				t.Errorf("%s: %s %s\n%s", c.ID, c.Status, c.ErrorMessage, output.String())
			}
		}
		for _, id := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
			if !ran[id] {
				t.Errorf("check %s did not run: %v", id, ran)
			}
		}
	})
}

// waitListening waits until something accepts connections on the loopback port; the
// bound only ends a failing test.
func waitListening(port string) error {
	deadline := time.Now().Add(waitBound)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on port %s: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
