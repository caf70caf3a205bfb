# relayroom: two commands on a fresh machine.
#   make run    local Postgres (installed when missing) + demo data + the service
#   make test   the same Postgres bootstrap, then every test with -race

SHELL := /bin/bash
GO ?= go
BIN := bin/relayroom
PG := deploy/local/pg.sh
TEST_PG_DIR := $(CURDIR)/.data/test-pg
TEST_FLAGS ?= -race -count=1 -timeout 20m

CONFORMANCE := .ci/conformance
.PHONY: run build test conformance-suite test-go check-generated generate fmt vet bench pg-stop clean

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

# The official MCP conformance suite and the Node.js 22 it needs, both from the npm
# registry at the versions pinned in $(CONFORMANCE)/package-lock.json; installed again
# only when the lock file changes.
conformance-suite:
	@cmp -s $(CONFORMANCE)/package-lock.json $(CONFORMANCE)/node_modules/.installed-lock 2>/dev/null || { \
	  cd $(CONFORMANCE) && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock; }

# Generated code is never edited by hand: fail when sqlc's output or the tools/list
# snapshots under api/ differ from what the sources generate.
check-generated:
	$(GO) tool sqlc -f sql/sqlc.yaml diff
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^db/'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go' | grep -v '^db/'); exit 1; }
	$(GO) vet ./...

generate:
	$(GO) tool sqlc -f sql/sqlc.yaml generate
	$(GO) test ./internal/app -run TestToolsListSnapshots -count=1 -update

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '^db/')

bench:
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	DATABASE_URL="$$url" $(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

pg-stop:
	bash $(PG) stop $(CURDIR)/.data/pg
	bash $(PG) stop $(TEST_PG_DIR)

clean: pg-stop
	rm -rf bin .data
