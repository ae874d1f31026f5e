# Baton: build, local stack (ZooKeeper + Temporal dev server) and tests.
# Run `make help` for the list of targets.

# ------------------------------------------------------------------ variables
GO            ?= go
BIN_DIR       ?= $(CURDIR)/bin
STACK_DIR     ?= $(CURDIR)/.stack
SCRIPTS       := $(CURDIR)/deployments/scripts
# temporal CLI used by the stack and the integration tests (installed by `make deps`).
TEMPORAL_BIN  ?= $(or $(BATON_TEMPORAL_BIN),$(STACK_DIR)/bin/temporal)
# ZooKeeper installation (Debian package layout by default).
ZK_HOME       ?= $(or $(BATON_ZK_HOME),/usr/share/zookeeper)
# PostgreSQL bin dir for the tests' servers (empty: newest /usr/lib/postgresql/*/bin).
PG_BIN        ?= $(BATON_PG_BIN)
# Local stack ports (see deployments/scripts/stack.sh).
ZK_PORT       ?= $(or $(BATON_ZK_PORT),2181)
TEMPORAL_PORT ?= $(or $(BATON_TEMPORAL_PORT),7233)
UI_PORT       ?= $(or $(BATON_UI_PORT),8233)
TEST_TIMEOUT  ?= 25m
DEMO_KILL     ?=
# Extra flags for go test, e.g. GOTEST_FLAGS='-v -run TestFailover'.
GOTEST_FLAGS  ?=
# Benchmark selection and extra flags for `make bench`.
BENCH         ?= .
BENCH_FLAGS   ?= -benchmem
# `make bench-report`: the tables of docs/benchmarks.md to regenerate (regexp
# on their names; empty: all), or captured outputs to take them from instead
# of running (NAME=FILE ...).
BENCH_ONLY    ?=
BENCH_FROM    ?=
PKGS          ?= ./...
# Version of both binaries (--version): the git description, else what the
# Go toolchain records (see package version).
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS       := $(if $(VERSION),-X github.com/batoncrawl/baton/activities/cmdline/version.Version=$(VERSION))
# Fuzz target selection (regexp), time per target and extra flags for `make fuzz`.
FUZZ          ?= .
FUZZTIME      ?= 60s
FUZZ_FLAGS    ?= -parallel 1

SHELL         := bash
.SHELLFLAGS   := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Environment for everything that starts or talks to ZooKeeper/Temporal.
STACK_ENV := BATON_STACK_DIR="$(STACK_DIR)" BATON_TEMPORAL_BIN="$(TEMPORAL_BIN)" \
	BATON_ZK_HOME="$(ZK_HOME)" BATON_ZK_PORT="$(ZK_PORT)" \
	BATON_TEMPORAL_PORT="$(TEMPORAL_PORT)" BATON_UI_PORT="$(UI_PORT)"
# Environment for integration tests (they start their own servers on free ports).
TEST_ENV := BATON_TEMPORAL_BIN="$(TEMPORAL_BIN)" BATON_ZK_HOME="$(ZK_HOME)" BATON_PG_BIN="$(PG_BIN)"

.PHONY: help build deps bench-deps stack-up stack-down stack-status ensemble-up ensemble-down demo demo-down test test-unit bench bench-report fuzz vet clean distclean

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "; printf "Usage: make <target> [VAR=value]\n\nTargets:\n"} \
		/^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/baton-worker (./worker/cmd/baton-worker) and bin/baton (./starter), version VERSION (default: git describe).
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/baton-worker ./worker/cmd/baton-worker
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_DIR)/baton ./starter

deps: ## Install ZooKeeper, PostgreSQL and Chromium (apt, if missing), the Temporal CLI and warcio.js into .stack (if missing).
	BATON_ZK_HOME="$(ZK_HOME)" bash $(SCRIPTS)/install-zookeeper.sh
	BATON_PG_BIN="$(PG_BIN)" bash $(SCRIPTS)/install-postgres.sh
	BATON_STACK_DIR="$(STACK_DIR)" bash $(SCRIPTS)/install-temporal.sh
	BATON_STACK_DIR="$(STACK_DIR)" bash $(SCRIPTS)/install-warcio.sh
	bash $(SCRIPTS)/install-chromium.sh

bench-deps: ## Install what BenchmarkAgainstColly's real site is: nginx and Debian's HTML manual of PostgreSQL (apt, if missing).
	bash $(SCRIPTS)/install-realsite.sh

stack-up: deps ## Start the local stack (ZooKeeper :2181 with digest auth, credentials in .stack/zk-auth; Temporal :7233, UI :8233) and wait until healthy.
	$(STACK_ENV) bash $(SCRIPTS)/stack.sh up

stack-down: ## Stop the local stack.
	$(STACK_ENV) bash $(SCRIPTS)/stack.sh down

stack-status: ## Show whether the local stack is running and healthy.
	$(STACK_ENV) bash $(SCRIPTS)/stack.sh status

ensemble-up: deps ## Start a 3-node ZooKeeper ensemble on loopback (clients 2181-2183; BATON_ENSEMBLE_PORT moves it).
	BATON_STACK_DIR="$(STACK_DIR)" BATON_ZK_HOME="$(ZK_HOME)" bash $(SCRIPTS)/ensemble.sh up

ensemble-down: ## Stop the ZooKeeper ensemble.
	BATON_STACK_DIR="$(STACK_DIR)" BATON_ZK_HOME="$(ZK_HOME)" bash $(SCRIPTS)/ensemble.sh down

demo: deps ## Run the demo: local stack, 3 workers, the demo site, a crawl of it (DEMO_KILL=1 kills a runner mid-crawl).
	$(STACK_ENV) BATON_DEMO_KILL="$(DEMO_KILL)" bash $(SCRIPTS)/demo.sh up

demo-down: ## Stop the demo's workers and site, and the local stack.
	$(STACK_ENV) bash $(SCRIPTS)/demo.sh down

test: deps ## Run all tests, including integration tests (they start their own servers).
	$(TEST_ENV) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) $(PKGS)

test-unit: ## Run unit tests only (-short skips everything needing ZooKeeper/Temporal/binaries).
	$(GO) test -short -count=1 $(GOTEST_FLAGS) $(PKGS)

bench: deps ## Run benchmarks (BENCH=regexp, BENCH_FLAGS=...).
	$(TEST_ENV) $(GO) test -run '^$$' -bench '$(BENCH)' $(BENCH_FLAGS) -timeout $(TEST_TIMEOUT) $(PKGS)

bench-report: ## Run the benchmarks of docs/benchmarks.md and rewrite its tables (BENCH_ONLY=regexp; BENCH_FROM='NAME=FILE ...' rewrites from captured output without running).
	$(if $(BENCH_FROM),,$(MAKE) deps)
	$(TEST_ENV) $(GO) run deployments/scripts/benchreport/main.go -doc docs/benchmarks.md \
		$(if $(BENCH_ONLY),-only '$(BENCH_ONLY)') $(foreach f,$(BENCH_FROM),-from '$(f)')

fuzz: ## Fuzz each Fuzz* target in turn for FUZZTIME (FUZZ=regexp, PKGS=..., FUZZ_FLAGS=...); stops at the first failure.
	@for pkg in $$($(GO) list $(PKGS)); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep -E '^Fuzz' | grep -E '$(FUZZ)' || true); do \
			echo "== $$t ($$pkg, $(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $(FUZZ_FLAGS) $$pkg; \
		done; \
	done

vet: ## Run go vet.
	$(GO) vet $(PKGS)

clean: demo-down ensemble-down ## Stop the demo, the stack and the ensemble; remove bin/ and their data and logs (keeps .stack/bin).
	rm -rf "$(BIN_DIR)" "$(STACK_DIR)/zookeeper" "$(STACK_DIR)/temporal" "$(STACK_DIR)/demo" "$(STACK_DIR)/ensemble"

distclean: clean ## Like clean, and also remove .stack/ (including the installed temporal CLI).
	rm -rf "$(STACK_DIR)"
