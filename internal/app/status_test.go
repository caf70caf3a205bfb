package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestStatusRoutes pins the index, liveness and readiness answers byte for byte, through
// the whole middleware stack: monitors and people's scripts parse them.
func TestStatusRoutes(t *testing.T) {
	t.Parallel()
	p := newInProcess(t, 4, 30*time.Second)
	st, err := p.db.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const base = "http://relay.test" // newInProcess's public URL
	migrations, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, body string }{
		{"liveness says ok", "/healthz", `{"status":"ok"}` + "\n"},
		{"readiness names the schema version", "/readyz", `{"listeners":{"dashboard":"connecting","wake":"connecting"},"migrations":` + string(migrations) + `,"status":"ok"}` + "\n"},
		{"the index names every endpoint", "/", `{"endpoints":{"all_rooms":"` + base + `/api/mcp","desk":"` + base + `/desk/mcp",` +
			`"room":"` + base + `/api/mcp/p/{project_id}","threads":"` + base + `/mcp/{connect_code}?part={part}"},` +
			`"service":"relayroom","version":"0.1.0"}` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := p.serve(t, http.MethodGet, c.path, "", nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			if got := rec.Body.String(); got != c.body {
				t.Errorf("body\n%s\nwant\n%s", got, c.body)
			}
		})
	}
	t.Run("a route below the index is not the index", func(t *testing.T) {
		if rec := p.serve(t, http.MethodGet, "/no-such-page", "", nil); rec.Code != http.StatusNotFound {
			t.Errorf("status %d, want 404: %s", rec.Code, rec.Body)
		}
	})
	t.Run("readiness says when the database is unreachable", func(t *testing.T) {
		p.db.Close()
		rec := p.serve(t, http.MethodGet, "/readyz", "", nil)
		want := `{"reason":"database unreachable","status":"unavailable"}` + "\n"
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", rec.Code)
		}
		if got := rec.Body.String(); got != want {
			t.Errorf("body\n%s\nwant\n%s", got, want)
		}
	})
}
