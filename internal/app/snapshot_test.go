package app_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

var update = flag.Bool("update", false, "rewrite the tools/list snapshots under api/")

// TestToolsListSnapshots keeps api/tools/*.json equal to what each endpoint's tools/list
// answers. A change to a tool's name, schema, description or annotations shows up as a
// diff in review; `make generate` rewrites them.
func TestToolsListSnapshots(t *testing.T) {
	d, _ := pgtest.Open(t)
	a, err := app.New(config.Config{MaxBodyBytes: 1 << 20}, app.NewLogger(os.Stderr, "error"), d, "http://localhost:48801")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "api", "tools")
	for name, ep := range a.Endpoints() {
		got, err := mcp.ToolsListJSON(ep)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join(dir, name+".json")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run `make generate`)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: the %s endpoint's tools/list changed; run `make generate` and review the diff", path, name)
		}
	}
}
