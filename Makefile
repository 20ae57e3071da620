# cassfs — one entry point for building, checking, testing, benchmarking and the demo.
# `make help` lists the targets.

SHELL := /bin/bash
GO ?= go
BIN := bin/cassfs
# The e2e suite starts Cassandra (~15 s), generates and ingests images; 30 minutes is a
# generous bound that still ends a hung run.
E2E_TIMEOUT ?= 30m

.PHONY: help deps build check unit e2e test bench mutate demo cassandra-start cassandra-stop cassandra-wipe clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

deps: ## install what is missing: Go modules, Java 17 and Maven (Debian), the Cassandra jars
	@command -v $(GO) >/dev/null || { echo "Go 1.26.8+ is required (go.mod): https://go.dev/dl/" >&2; exit 1; }
	$(GO) mod download
	./e2e/cassandra.sh fetch

build: ## build bin/cassfs
	$(GO) build -o $(BIN) ./cmd/cassfs

check: ## gofmt, go vet, staticcheck with every check (stylecheck included: staticcheck.conf), blankerr (no error assigned to _ in a test)
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags e2e ./e2e/
	$(GO) run ./internal/blankerr/cmd/blankerr ./...
	GOFLAGS=-tags=e2e $(GO) run ./internal/blankerr/cmd/blankerr ./e2e/

unit: ## unit and composite tests, with -race, then once more on one CPU (CI=true: no test may skip)
	@mkdir -p .cache
	$(GO) tool gotestsum --jsonfile .cache/unit.json -- -race -count=1 -timeout 10m ./...
	./e2e/check-skips.sh .cache/unit.json
	GOMAXPROCS=1 $(GO) test -count=1 -timeout 10m ./...

e2e: deps ## end-to-end tests: real Cassandra (started here), the built binary (CI=true: no test may skip)
	@mkdir -p .cache
	$(GO) tool gotestsum --jsonfile .cache/e2e.json -- -tags e2e -race -count=1 -timeout $(E2E_TIMEOUT) ./e2e/
	./e2e/check-skips.sh .cache/e2e.json

test: check unit e2e ## everything CI runs

bench: deps build ## benchmarks against the real Cassandra and through real mounts; results in bench/
	@mkdir -p bench
	./e2e/cassandra.sh start
	$(GO) test -tags e2e -run '^$$' -bench StoreGet -benchtime 3000x -count 3 -timeout 30m ./e2e/ | tee bench/store-get.txt
	$(GO) test -tags e2e -run '^$$' -bench BlobReadPaths -benchtime 8000x -count 3 -timeout 30m ./e2e/ | tee bench/blob-read-paths.txt
	$(GO) test -tags e2e -run '^$$' -bench FilesystemRead -benchtime 1x -count 3 -timeout 30m ./e2e/ | tee bench/filesystem-read.txt
	$(GO) test -tags e2e -run '^$$' -bench ColdBlocks -benchtime 1x -count 3 -timeout 30m ./e2e/ | tee bench/cold-blocks.txt
	$(GO) test -tags e2e -run '^$$' -bench RecordView -benchtime 1x -count 3 -timeout 40m ./e2e/ 2>&1 | grep -v '^python-env' | tee bench/record-view.txt
	$(GO) test -tags e2e -run '^$$' -bench MountStart -benchtime 1x -count 1 -timeout 30m ./e2e/ | tee bench/mount-start.txt
	$(GO) test -tags e2e -run '^$$' -bench ImageNetScale -benchtime 1x -count 1 -timeout 90m -v ./e2e/ 2>&1 | grep -v '^=== ' | tee bench/imagenet-scale.txt
	$(GO) test -tags e2e -run '^$$' -bench CacheDir -benchtime 1x -count 1 -timeout 30m ./e2e/ | tee bench/cachedir.txt
	$(GO) test -tags e2e -run '^$$' -bench BeyondCache -benchtime 1x -count 2 -timeout 30m ./e2e/ | tee bench/beyond-cache.txt
	$(GO) test -tags e2e -run '^$$' -bench TierDatabaseStopped -benchtime 1x -count 2 -timeout 30m ./e2e/ | tee bench/tier-database-stopped.txt
	$(GO) test -tags e2e -run '^$$' -bench OneMountPerNode -benchtime 1x -count 2 -timeout 30m ./e2e/ | tee bench/one-mount-per-node.txt
	$(GO) test -tags e2e -run '^$$' -bench AttachedColdEpoch -benchtime 1x -count 2 -timeout 30m ./e2e/ | tee bench/attached-cold-epoch.txt
	$(GO) test -run '^$$' -bench 'IndexMemory|HugeDirectory' -benchtime 1x -count 1 -timeout 30m ./fs/ | tee bench/index-and-listing.txt
	$(GO) test -run '^$$' -bench CachedEpochSources -benchtime 1x -count 3 -timeout 30m ./mount/ ./fs/ | tee bench/cached-epoch-sources.txt
	$(GO) test -run '^$$' -bench Create -benchtime 1x -count 1 -benchmem -timeout 30m ./splits/ | tee bench/split-create.txt
	$(GO) test -run '^$$' -bench BlobFloor -count 3 -timeout 30m ./prefetch/ | tee bench/blob-floor.txt
	$(GO) test -run '^$$' -bench EvictionPolicies -benchtime 1x -count 1 -timeout 30m ./evict/ | tee bench/eviction-policies.txt
	$(GO) test -tags e2e -run '^$$' -bench Soak -benchtime 1x -count 1 -timeout 30m -v ./e2e/ 2>&1 | tee bench/soak.txt
	$(GO) test -tags e2e -run '^$$' -bench 'Slowdown$$' -benchtime 1x -count 2 -timeout 20m -v ./e2e/ 2>&1 | grep -v '^\s*time=' | tee bench/slowdown.txt
	CASSFS_BENCH_BATCHES=$(CURDIR)/bench/latency-batches.json $(GO) test -tags e2e -run '^$$' -bench 'Latency$$' -benchtime 1x -count 1 -timeout 60m ./e2e/ 2>&1 | tee bench/latency.txt
	CASSFS_BENCH_CURVE=$(CURDIR)/bench/latency-curve.json $(GO) test -tags e2e -run '^$$' -bench LatencyCurve -benchtime 1x -count 1 -timeout 60m ./e2e/ 2>&1 | tee bench/latency-curve.txt
	@/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null; }
	/usr/bin/python3 bench/plot_batches.py bench/latency-batches.json bench/batch-times.png
	/usr/bin/python3 bench/latency_curve.py bench/latency-curve.json bench/latency-curve.png > bench/latency-curve.md
	/usr/bin/python3 bench/latency_table.py bench/latency.txt > bench/latency-table.md

# Mutation testing: gremlins (a maintained Go mutation tool, pinned here, fetched on first
# use) mutates the packages that hold the invariants and runs their unit tests against each
# mutant. Not part of make test (about 20 minutes on two cores); run it after changing these
# packages and look at every mutant that lived (docs/mutation.md).
GREMLINS := github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
MUTATE_PKGS ?= prefetch evict disktier index splits view store store/memstore store/hedge ingest

mutate: ## mutation testing of the packages that hold the invariants; scores and survivors in .cache/mutate/
	@mkdir -p .cache/mutate
	@for p in $(MUTATE_PKGS); do \
	  out=.cache/mutate/$$(echo $$p | tr / -).json; \
	  echo "== $$p"; \
	  excl=; [ $$p = store ] && excl="-E (cassandra|memstore|storetest|hedge)/"; \
	  $(GO) run $(GREMLINS) unleash --workers 1 --test-cpu 2 --timeout-coefficient 10 -S lt $$excl -o $$out ./$$p || exit 1; \
	done

demo: deps build ## start a local Cassandra, generate and ingest a dataset, mount it, list an epoch, read it with DALI
	./e2e/demo.sh

cassandra-start: ## start a one-node Cassandra on 127.0.0.1:9042
	./e2e/cassandra.sh start

cassandra-stop: ## stop the local Cassandra
	./e2e/cassandra.sh stop

cassandra-wipe: ## stop the local Cassandra and delete its data
	./e2e/cassandra.sh wipe

clean: ## remove build output (keeps downloaded jars and Cassandra data)
	rm -rf bin
