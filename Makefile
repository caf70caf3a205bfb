# relayroom: two commands on a fresh machine.
#   make run    local Postgres (installed when missing) + demo data + the service
#   make test   the same Postgres bootstrap, then every test with -race

SHELL := /bin/bash
GO ?= go
BIN := bin/relayroom
PG := deploy/local/pg.sh
TEST_PG_DIR := $(CURDIR)/.data/test-pg
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: run build test test-go check-generated generate fmt vet bench fuzz pg-stop clean

build:
	$(GO) build -o $(BIN) ./cmd/relayroom

run: build
	./$(BIN) dev

# Every test runs against a private cluster with fsync off (a test database is disposable).
test: check-generated
	@set -euo pipefail; \
	url=$$(bash $(PG) start $(TEST_PG_DIR) --fast); \
	echo "test database: $$url"; \
	DATABASE_URL="$$url" $(GO) test $(TEST_FLAGS) ./...

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

# Native Go fuzzing, each target for FUZZTIME (CI runs this after make test, whose plain
# go test already replays every target's seed corpus and testdata/fuzz). A failure writes
# its input under the package's testdata/fuzz/<target>/: commit it as a regression seed.
FUZZTIME ?= 8s
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
	bash $(PG) stop $(CURDIR)/.data/pg
	bash $(PG) stop $(TEST_PG_DIR)

clean: pg-stop
	rm -rf bin .data
