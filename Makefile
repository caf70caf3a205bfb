# relayroom: two commands on a fresh machine.
#   make run    local Postgres (installed when missing) + demo data + the service
#   make test   the same Postgres bootstrap, then every test with -race
#   make test-citus   a Citus coordinator + 2 workers (Citus built when missing), the
#               schema distributed, the end-to-end and isolation suites against it
# Operator tools (bounded in time, loopback only; not part of make test):
#   make loadtest   every tool at 32 connections beside raw pgx loops (docs/performance.md)
#   make chaos      the security review's attacks against a real server (docs/reliability.md)
#   make screenshots  the dashboard's screenshots in docs/img, from the browser tests

SHELL := /bin/bash
GO ?= go
BIN := bin/relayroom
PG := deploy/local/pg.sh
TEST_PG_DIR := $(CURDIR)/.data/test-pg
TEST_FLAGS ?= -race -count=1 -timeout 20m

CONFORMANCE := .ci/conformance
.PHONY: screenshots test-citus run build test conformance-suite test-go check-generated generate fmt vet bench fuzz loadtest chaos pg-stop clean

build:
	$(GO) build -o $(BIN) ./cmd/relayroom

run: build
	./$(BIN) dev

# Every test runs against a private cluster with fsync off (a test database is disposable).
test: check-generated conformance-suite
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	echo "test database: $$url"; \
	DATABASE_URL="$$url" RELAYROOM_CONFORMANCE_DIR=$(CURDIR)/$(CONFORMANCE)/node_modules $(GO) test $(TEST_FLAGS) ./...

# The dashboard's screenshots in docs/img, from the browser tests (Debian's chromium;
# docs/dashboard.md shows them). Each browser test also keeps its own under its artifacts.
screenshots:
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	mkdir -p docs/img; \
	DATABASE_URL="$$url" RELAYROOM_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run 'Dashboard.*InABrowser' ./internal/app

# The same suites on a real Citus cluster (docs/scale.md, "Tests and CI"): deploy/citus/cluster.sh
# builds Citus from deploy/citus/vendor/ when PostgreSQL 15 has none, starts a coordinator
# and two workers under .data/citus and prints the coordinator's URL. The relayroom
# database there is migrated and distributed with the CLI, as an operator would; each
# test's database is a clone of a distributed template on every node (internal/pg/pgtest).
# What runs (CI runs this target; it must stay reliable and within CI's budget, and every
# test here costs three database clones and three drops):
#   CITUS_PKGS, whole: internal/pg (the router-plan test, every query run on the
#     coordinator, the catalog, RLS and migration tests), internal/tenancy (the credential
#     resolution and its isolation), internal/app (every end-to-end suite: both toolsets
#     and the desk through the Go SDK and raw HTTP, the isolation matrices, the sign-in,
#     the dashboard's pages and browser tests, the reliability tests, the pooler),
#     internal/wake, knowledge, oauth, admin and audit, the CLI (cmd/relayroom), and the
#     desk's unit suite (its search plans and accent folding on a distributed schema).
#     The threads' and rooms' unit suites pass there too (3 and 6 minutes, 2026-12-06)
#     and are left to a run by hand (CITUS_PKGS='./internal/threads/... ./internal/rooms/...'):
#     internal/app drives both toolsets end to end there and internal/pg runs every
#     query, and with them CI came near an hour.
#   CITUS_APP_TESTS: a -run pattern of internal/app tests, for a run by hand
#     (CITUS_PKGS='./internal/pg/...' CITUS_APP_TESTS='^TestIsolationMatrix$$').
CITUS_DIR := $(CURDIR)/.data/citus
CITUS_PKGS ?= ./internal/pg/... ./internal/tenancy/... ./internal/app/... ./internal/wake/... ./internal/knowledge/... ./internal/oauth/... ./internal/admin/... ./internal/audit/... ./cmd/relayroom/... ./internal/desk/...
CITUS_APP_TESTS ?=
# -p 1: one package at a time. Two at once (go test's default here) left the 2 cores
# at a load average of 11 beside the three Citus nodes, each package took about twice
# as long, so the whole took as long, and tests waiting on the database ran out of
# their budgets (docs/scale.md).
CITUS_FLAGS ?= -count=1 -timeout 30m -p 1
# The test servers' database time per request on the coordinator (5 s on plain
# PostgreSQL): a statement across shards (authentication's probe, the caller's directory)
# pays a connection to each worker, and at a high load average 5 s ran out before a
# refusal could be told from the load. Tests about the deadline set their own.
CITUS_STATEMENT_TIMEOUT ?= 30s
test-citus: build conformance-suite
	@set -euo pipefail; \
	url=$$(bash deploy/citus/cluster.sh start $(CITUS_DIR)); \
	echo "coordinator: $$url"; \
	DATABASE_URL="$$url" ./$(BIN) migrate up >/dev/null; \
	DATABASE_URL="$$url" ./$(BIN) migrate citus >/dev/null; \
	export DATABASE_URL="$$url" RELAYROOM_CONFORMANCE_DIR=$(CURDIR)/$(CONFORMANCE)/node_modules \
		RELAYROOM_TEST_STATEMENT_TIMEOUT=$(CITUS_STATEMENT_TIMEOUT); \
	if [ -n "$(CITUS_PKGS)" ]; then $(GO) test $(CITUS_FLAGS) $(CITUS_PKGS); fi; \
	if [ -n '$(CITUS_APP_TESTS)' ]; then $(GO) test $(CITUS_FLAGS) -run '$(CITUS_APP_TESTS)' ./internal/app/; fi

# The official MCP conformance suite and the Node.js 22 it needs, both from the npm
# registry at the versions pinned in $(CONFORMANCE)/package-lock.json; installed again
# only when the lock file changes.
conformance-suite:
	@cmp -s $(CONFORMANCE)/package-lock.json $(CONFORMANCE)/node_modules/.installed-lock 2>/dev/null || { \
	  cd $(CONFORMANCE) && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock; }

# Generated code is never edited by hand: fail when sqlc's output or the tools/list
# snapshots under api/ differ from what the sources generate (the desk ingest API's
# OpenAPI document is checked here; the snapshots need a database and run in make test).
check-generated:
	$(GO) tool sqlc -f sql/sqlc.yaml diff
	$(GO) test ./internal/desk -run '^TestIngestOpenAPI$$' -count=1
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^db/'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go' | grep -v '^db/'); exit 1; }
	$(GO) vet ./...

generate:
	$(GO) tool sqlc -f sql/sqlc.yaml generate
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	DATABASE_URL="$$url" $(GO) test ./internal/app -run TestToolsListSnapshots -count=1 -update
	$(GO) test ./internal/desk -run '^TestIngestOpenAPI$$' -count=1 -update

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^db/')

bench:
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	DATABASE_URL="$$url" $(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

# A scratch database (relayroom_loadtest) in the test cluster, a `relayroom serve` on a free
# loopback port; LOAD_FLAGS passes flags (e.g. LOAD_FLAGS='-duration 10s -only send').
LOAD_FLAGS ?=
loadtest: build
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	$(GO) build -o bin/relayroom-load ./cmd/relayroom-load; \
	./bin/relayroom-load -database-url "$$url" -relayroom ./$(BIN) $(LOAD_FLAGS)

# Its own cluster under .data/chaos-pg (restarted by one attack, stopped at the end) and a
# fresh server per attack; CHAOS_FLAGS passes flags (relayroom-chaos -h lists them).
CHAOS_PG_DIR := $(CURDIR)/.data/chaos-pg
CHAOS_FLAGS ?=
chaos: build
	$(GO) build -o bin/relayroom-chaos ./cmd/relayroom-chaos
	./bin/relayroom-chaos -pg-dir $(CHAOS_PG_DIR) -pg-script $(PG) -relayroom ./$(BIN) $(CHAOS_FLAGS)

# Native Go fuzzing, each target for FUZZTIME (CI runs this after make test, whose plain
# go test already replays every target's seed corpus and testdata/fuzz). A failure writes
# its input under the package's testdata/fuzz/<target>/: commit it as a regression seed.
# The budget is a count of executions, not a duration: Go 1.26's fuzz coordinator can fail
# a target with a bare "context deadline exceeded" when a duration ends while a worker is
# busy (go.dev/issue/75804, fixed in Go 1.27), which reddened CI with nothing found.
FUZZTIME ?= 30000x
FUZZ_TARGETS := \
	internal/text:FuzzCheckJSON \
	internal/mcp:FuzzParseMessage \
	internal/mcp:FuzzPrepareArgs \
	internal/auth:FuzzParse \
	internal/tenancy:FuzzCheckPart \
	internal/threads:FuzzParseID \
	internal/rooms:FuzzParseCursor \
	internal/rooms:FuzzCleanFilename

fuzz:
	@set -euo pipefail; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 ./$$pkg; \
	done

pg-stop:
	bash deploy/citus/cluster.sh stop $(CITUS_DIR)
	bash $(PG) stop $(CURDIR)/.data/pg
	bash $(PG) stop $(TEST_PG_DIR)
	bash $(PG) stop $(CHAOS_PG_DIR)

clean: pg-stop
	rm -rf bin .data
