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

# The trace viewer's tests run it in headless Chromium: Debian's package is
# installed here when missing (as root), once, before the tests run in
# parallel; internal/browser does the same for a test run outside make.
CHROMIUM_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends chromium

# Editors run the conductor on macOS too, where these tests cannot: vetting
# the tree for it there checks that the product and its tests build. The
# proxy library is vetted for Windows as well, where it builds (README).
MACOS := GOOS=darwin GOARCH=arm64

test: ## vet, then every test with the race detector (real peers included), in every module
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo "== installing chromium for the trace viewer's tests" && $(CHROMIUM_INSTALL); } || \
		echo "*** no chromium and it could not be installed: the trace viewer's browser tests will SKIP"
	@unformatted="$$(gofmt -l $$(find . -name '*.go' -not -path '*/node_modules/*'))"; \
		[ -z "$$unformatted" ] || { echo "gofmt would change: $$unformatted"; exit 1; }
	$(GO) vet ./...
	$(MACOS) $(GO) vet ./...
	GOOS=windows $(GO) vet ./proxy/...
	$(GO) test -race -count=1 ./...
	@set -e; for m in $(MODULES); do \
		echo "== module $$m"; \
		(cd $$m && $(GO) vet ./... && $(MACOS) $(GO) vet ./... && $(GO) test -race -count=1 ./...); \
	done

build: ## a static binary in ./acp-conductor
	CGO_ENABLED=0 $(GO) build -trimpath -o acp-conductor ./cmd/acp-conductor

# Go minimizes each input that reaches new code, and each failing one, for up
# to a minute by default, while that worker tries nothing new: a 1m run of
# FuzzLend spent 18 s of 20 so. Five seconds shrink inputs of these sizes.
FUZZTIME ?= 1m
FUZZMINIMIZETIME ?= 5s
fuzz: ## run every fuzz target in the tree for FUZZTIME (default 1m) each
	@set -e; for f in $$(grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' .); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$(dirname $$f) $$t"; \
			$(GO) test ./$$(dirname $$f) -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME); \
		done; \
	done

# The bench counts the relay's instructions per message under valgrind
# (bench/instructions.go), installed here as chromium is for the tests.
VALGRIND_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends valgrind

bench: ## the performance suite (not part of make test); prints a table of ratios to a direct pipe
	@command -v valgrind >/dev/null 2>&1 || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo "== installing valgrind for the instruction counts" && $(VALGRIND_INSTALL); } || \
		echo "*** no valgrind and it could not be installed: the instruction counts are left out"
	$(GO) run ./bench
