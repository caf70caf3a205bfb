package archtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/relayroom/relayroom/"

// The toolsets: each serves its own MCP endpoint and never imports another.
var toolsets = []string{"internal/threads", "internal/rooms", "internal/desk"}

// dbImporters are the data layer and the domain services: the only packages that may
// import the generated queries (db). The composition root, the commands and the
// protocol core reach the database only through these packages' constructors.
var dbImporters = []string{
	"db", "internal/pg",
	"internal/admin", "internal/audit", "internal/idempotency", "internal/knowledge", "internal/tenancy",
	"internal/throttle", "internal/wake",
	// sign-in's services: people's sessions (web) and the authorization server's storage
	"internal/web", "internal/oauth",
	"internal/threads", "internal/rooms", "internal/desk",
}

type pkg struct {
	ImportPath string
	Imports    []string // direct, of the package's non-test files
	Deps       []string // every package it depends on, transitively
}

// listPackages asks the go command about every package of the module (test files aside:
// a test may seed through the data layer).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Imports,Deps", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the rules would check nothing", len(pkgs))
	}
	return pkgs
}

// rel is a package's path inside the module, "" for one outside it.
func rel(path string) string {
	if r, ok := strings.CutPrefix(path, module); ok {
		return r
	}
	if path == strings.TrimSuffix(module, "/") {
		return "."
	}
	return ""
}

// within reports whether path is dir or a package below it.
func within(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

func withinAny(path string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(path, d) })
}

func TestImportRules(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	t.Run("a toolset imports no other toolset", func(t *testing.T) {
		t.Parallel()
		for _, p := range pkgs {
			self := rel(p.ImportPath)
			for _, ts := range toolsets {
				if !within(self, ts) {
					continue
				}
				for _, d := range p.Deps {
					if dep := rel(d); withinAny(dep, toolsets) && !within(dep, ts) {
						t.Errorf("toolset package %s depends on toolset package %s", self, dep)
					}
				}
			}
		}
	})
	t.Run("the MCP core imports no toolset and no database package", func(t *testing.T) {
		t.Parallel()
		forbidden := append([]string{"db", "internal/pg"}, toolsets...)
		for _, p := range pkgs {
			if self := rel(p.ImportPath); !within(self, "internal/mcp") {
				continue
			}
			for _, d := range p.Deps {
				if dep := rel(d); withinAny(dep, forbidden) {
					t.Errorf("%s depends on %s", rel(p.ImportPath), dep)
				}
			}
		}
	})
	t.Run("only the data layer and domain services import db", func(t *testing.T) {
		t.Parallel()
		for _, p := range pkgs {
			self := rel(p.ImportPath)
			if withinAny(self, dbImporters) {
				continue
			}
			for _, imp := range p.Imports {
				if rel(imp) == "db" {
					t.Errorf("%s imports db; reach the database through a domain service's New", self)
				}
			}
		}
	})
}
