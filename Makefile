# The two commands a newcomer needs are `make demo` and `make test`; both
# install what they need (Go modules, and the npm packages of the test peers).

GO ?= go

.PHONY: demo test build fuzz bench

# The demo is a program of its own (examples/demo), not a part of the
# product: it is built beside acp-conductor, which it runs.
demo: ## run a complete sample chain with no set-up
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) build -o "$$d/" ./cmd/acp-conductor ./examples/demo && "$$d/demo"

# Test-only modules: they hold the peers (the official MCP Go SDK) that must
# stay out of the product's own go.mod.
MODULES := $(sort $(dir $(shell find . -mindepth 2 -name go.mod -not -path '*/node_modules/*')))

test: ## vet, then every test with the race detector (real peers included), in every module
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	@set -e; for m in $(MODULES); do \
		echo "== module $$m"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 ./...); \
	done

build: ## a static binary in ./acp-conductor
	CGO_ENABLED=0 $(GO) build -trimpath -o acp-conductor ./cmd/acp-conductor

FUZZTIME ?= 1m
fuzz: ## run each fuzz target for FUZZTIME (default 1m)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzUnwrap$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzPeek$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/wire -run '^$$' -fuzz '^FuzzLineChannel$$' -fuzztime $(FUZZTIME)
	$(GO) test ./config -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./config -run '^$$' -fuzz '^FuzzParseComponent$$' -fuzztime $(FUZZTIME)

bench: ## the performance suite (not part of make test); prints a table of ratios to a direct pipe
	$(GO) run ./bench
