# plugreg — run `make help` for the targets.
SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# grpcnotrace drops golang.org/x/net/trace and with it text/template, whose
# MethodByName keeps every exported method in the binary: 2.5 MB smaller,
# about 2 MB less resident memory for the agent.
TAGS    ?= grpcnotrace

OSES    := linux darwin freebsd openbsd netbsd dragonfly windows
TARGETS := $(filter-out dragonfly/arm64,$(foreach o,$(OSES),$(o)/amd64 $(o)/arm64)) linux/arm linux/riscv64

PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTOS             := proto/pluginregistration/v1/api.proto proto/plugreg/v1/registry.proto proto/plugreg/v1/handler.proto proto/etcd/v3/etcd.proto

.PHONY: help build test demo demo-fleet bench-fleet generate check-generated cross bench lint fuzz clean test-windows bench-agent soak interop qemu mutate

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build bin/plugreg for this machine
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(TAGS)' -ldflags='$(LDFLAGS)' -o bin/plugreg .

test: ## go vet + every test under the race detector, and the largest registry without it; then lists the access tests skipped (not root) and why
	$(GO) vet ./...
	@skips=$$(mktemp); trap 'rm -f "$$skips"' EXIT; export PLUGREG_ACCESS_SKIPS=$$skips; status=0; \
	{ echo "$(GO) test -race -shuffle=on -count=1 ./..."; $(GO) test -race -shuffle=on -count=1 ./... && \
	  echo "$(GO) test -count=1 -run '^TestCLIReadsTheLargestRegistry$$' ." && \
	  $(GO) test -count=1 -run '^TestCLIReadsTheLargestRegistry$$' .; } || status=$$?; \
	if [ -s "$$skips" ]; then \
	  echo "access rules not tested here: $$(wc -l <"$$skips") tests skipped (run as root to test them):"; sort "$$skips" | sed 's/^/  /'; \
	fi; exit $$status

demo: build ## agent + two example plugins in a temporary directory
	./testdata/demo.sh bin/plugreg

demo-fleet: build ## a real embedded etcd and two agents publishing as two nodes; one is killed -9 and leaves the fleet view after its TTL
	$(GO) build -o bin/etcd-demo ./plugins/fleet/testdata/etcd
	./testdata/demo-fleet.sh bin/plugreg bin/etcd-demo

bench-fleet: ## NODES simulated nodes (default 10000) x 20 plugins, real publishers, against one embedded etcd
	$(GO) build -o bin/benchfleet ./plugins/fleet/testdata/benchfleet
	bin/benchfleet -nodes $(or $(NODES),10000)

generate: ## regenerate proto/**/*.pb.go with pinned generators (needs protoc)
	GOBIN=$(CURDIR)/.bin $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/.bin $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH=$(CURDIR)/.bin:$$PATH protoc -I proto \
	  --go_out=proto --go_opt=paths=source_relative \
	  --go-grpc_out=proto --go-grpc_opt=paths=source_relative $(PROTOS:proto/%=%)

check-generated: generate ## fail if the committed generated code is stale
	git diff --exit-code proto/

cross: ## CGO_ENABLED=0 binaries for every target into dist/, and compile every package's tests per OS
	@set -e; for t in $(TARGETS); do os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "build $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -tags '$(TAGS)' -ldflags='$(LDFLAGS)' -o dist/plugreg-$$os-$$arch$$ext .; \
	done
	@set -e; for os in $(OSES); do echo "vet $$os/amd64 (tests included)"; CGO_ENABLED=0 GOOS=$$os GOARCH=amd64 $(GO) vet ./...; done

test-windows: ## the windows/amd64 tests under wine; .ci/wine/setup installs wine and mingw (Debian, root) if missing
	.ci/wine/setup
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) test -count=1 -exec $(CURDIR)/.ci/wine/exec ./...

interop: ## the registration client against plugins on Python's grpcio; .ci/interop/setup installs python3-grpcio (Debian, root) if missing, and fails where it cannot; a skipped test fails
	.ci/interop/setup
	PLUGREG_INTEROP_REQUIRED=1 $(GO) test -race -count=1 -run '^TestInterop' -v ./register

qemu: ## the agent built for linux/s390x, arm64, arm and riscv64 registers and deregisters a native plugin under qemu-user; .ci/qemu/setup installs qemu-user-static (Debian, root) if missing, and fails where it cannot; a skipped test fails
	.ci/qemu/setup
	PLUGREG_QEMU_REQUIRED=1 $(GO) test -count=1 -run '^TestQemu$$' -v .

bench: ## scan and registration benchmarks
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...

fuzz: ## run every fuzz target for FUZZTIME each (default 10s; a count such as 5000x cannot hit golang/go#75804, a spurious "context deadline exceeded")
	$(GO) test -run='^$$' -fuzz='^FuzzDiff$$' -fuzztime=$(or $(FUZZTIME),10s) ./scan
	$(GO) test -run='^$$' -fuzz='^FuzzParseAccept$$' -fuzztime=$(or $(FUZZTIME),10s) ./plugins/handler
	$(GO) test -run='^$$' -fuzz='^FuzzCache$$' -fuzztime=$(or $(FUZZTIME),10s) ./statecache
	$(GO) test -run='^$$' -fuzz='^FuzzLoad$$' -fuzztime=$(or $(FUZZTIME),10s) ./plugins/state
	$(GO) test -run='^$$' -fuzz='^FuzzRegistryEncodes$$' -fuzztime=$(or $(FUZZTIME),10s) ./plugins
	$(GO) test -run='^$$' -fuzz='^FuzzValidateInfo$$' -fuzztime=$(or $(FUZZTIME),10s) ./plugins/rules
	$(GO) test -run='^$$' -fuzz='^FuzzUnaryReply$$' -fuzztime=$(or $(FUZZTIME),10s) ./register/unary

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# AGENT_MODULES are the only modules the agent built with TAGS may link
# (`go version -m`): etcd is spoken through plugins/fleet's own client.
AGENT_MODULES := golang.org/x/sys|golang.org/x/net|golang.org/x/text|google.golang.org/grpc|google.golang.org/protobuf|google.golang.org/genproto/googleapis/rpc|github.com/lmittmann/tint

lint: ## gofmt, vet for every target OS, staticcheck, the import rules of STYLE.md §1 per OS (statecache on the standard library alone), the exported names per package within .ci/exported-limits, functions of at most 80 lines (.ci/funclen-allow), go mod tidy, no text/template in the agent built with TAGS, no module beyond AGENT_MODULES in it, no net/http server in it (register/metrics serves HTTP itself), and no grpc-go client (plugins/grpcconn)
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -s -l .; exit 1; }
	@set -e; for os in $(OSES); do CGO_ENABLED=0 GOOS=$$os $(GO) vet ./...; done
	$(GO) run $(STATICCHECK) ./...
	$(GO) run .ci/imports.go $(OSES)
	$(GO) run .ci/exported.go $(OSES)
	$(GO) run .ci/funclen.go
	$(GO) mod tidy -diff
	@! $(GO) list -deps -tags '$(TAGS)' . | grep -x 'text/template' || { echo 'the agent links text/template, which keeps every exported method: see TAGS'; exit 1; }
	@set -e; bin=$$(mktemp); trap 'rm -f $$bin' EXIT; CGO_ENABLED=0 $(GO) build -tags '$(TAGS)' -o $$bin .; \
	  extra=$$($(GO) version -m $$bin | awk '$$1 == "dep" {print $$2}' | grep -vxE '$(AGENT_MODULES)' || true); \
	  test -z "$$extra" || { echo "the agent links modules beyond AGENT_MODULES:" $$extra; exit 1; }
	@set -e; bin=$$(mktemp); trap 'rm -f $$bin' EXIT; CGO_ENABLED=0 $(GO) build -tags '$(TAGS)' -o $$bin .; \
	  ! $(GO) tool nm $$bin | grep -E 'net/http\.\(\*conn\)\.serve$$|net/http\.\(\*http2serverConn\)' | head -1 | grep . || { echo "the agent links net/http's server: register/metrics serves HTTP itself"; exit 1; }
	@set -e; bin=$$(mktemp); trap 'rm -f $$bin' EXIT; CGO_ENABLED=0 $(GO) build -tags '$(TAGS)' -o $$bin .; \
	  ! $(GO) tool nm $$bin | grep -E 'google\.golang\.org/grpc\.(\(\*ClientConn\)\.Invoke|NewClient)$$' | head -1 | grep . || { echo "the agent links grpc-go's client: call a plugins/grpcconn.Conn or a register/unary.Client directly, not through grpc.ClientConnInterface"; exit 1; }

mutate: ## the named mutations of .ci/mutations.txt, one at a time in a copy of the tree, each against its package's tests (no -race), then the score per package and the survivors; BASE=REV scores that commit too, ONLY=REGEXP picks mutations by name
	$(GO) run .ci/mutate.go $(if $(BASE),-base '$(BASE)') $(if $(ONLY),-only '$(ONLY)')

clean: ## remove build output
	rm -rf bin dist .bin

bench-agent: ## the built agent against N plugins created at once, one sub-benchmark per size (N=20,1000 by default: a small node and a large one; N=1000 one size; make bench-agent N=10000 DIRS=100; LARGE=1: each reports the largest info allowed); idle CPU per 60 s over IDLE (default 60s), then the scan floor over FLOOR (default 20s; 0: none); COUNT=5 repeats it and ends with the median of each figure per size (.ci/medians); ARGS='--handler CSIPlugin=exec:/bin/true' adds agent flags (the plugins are CSIPlugin 1.0.0); PROFILE=FILE writes the agent's CPU profile, MEMPROFILE=FILE its allocation profile (FILE-N.EXT per size with several); BIN=PATH measures that plugreg binary (another commit's) instead of this tree's; PUBLISH=1 runs the agent with --publish to an etcd in the bench process and adds publish-lag-ms (last registration -> etcd holds all N plugin keys)
	set -o pipefail; $(GO) test -run='^$$' -bench='^BenchmarkAgent$$' -benchtime=1x -count=$(or $(COUNT),1) -timeout=60m . -args $(if $(N),-plugins=$(N)) -dirs=$(or $(DIRS),0) -agent-args='$(ARGS)' $(if $(IDLE),-idle=$(IDLE)) $(if $(FLOOR),-floor=$(FLOOR)) $(if $(LARGE),-large) $(if $(PROFILE),-agent-cpuprofile=$(PROFILE)) $(if $(MEMPROFILE),-agent-memprofile=$(MEMPROFILE)) $(if $(PUBLISH),-publish) $(if $(BIN),-agent-bin=$(BIN)) | .ci/medians

soak: ## the built agent, a watcher and plugins churning at random for SOAK (default 10m); not in CI
	$(GO) test -run '^TestSoak$$' -count=1 -v -timeout 30m . -args -soak=$(or $(SOAK),10m)
