# agentd — build, test, lint, generate, benchmark, demo.
SHELL := /bin/bash
GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE    ?= $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS := -X github.com/devdepot-ai/agentd/internal/version.Version=$(VERSION) \
           -X github.com/devdepot-ai/agentd/internal/version.Commit=$(COMMIT) \
           -X github.com/devdepot-ai/agentd/internal/version.Date=$(DATE)

# Pinned tool versions (go install; the buf registry and remote plugins are not used).
BUF_VERSION                ?= v1.75.0
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.0
STATICCHECK_VERSION        ?= v0.7.0
NFPM_VERSION               ?= v2.48.0

BINARIES := agentd agentctl agenthub
# Static binaries, as make dist ships them (a cgo build links libc
# dynamically: +0.9 ms on every agentctl start); grpcnotrace leaves out
# golang.org/x/net/trace, which nothing here uses.
BUILD_TAGS := grpcnotrace

.PHONY: all build test fuzz lint proto proto-check tools bench bench-hub bench-sandbox demo demo-local clean
.PHONY: dist dist-tools package-test cross sandbox-base sandbox-runtime sdk-python-gen sdk-python-check test-python
.PHONY: k8s-up k8s-down k8s-smoke test-kube

all: build

build: ## build the binaries into bin/
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(BUILD_TAGS) -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(BINARIES))

test: ## go vet, every test with the race detector, and 300 inputs of each fuzz target
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=300x

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each
	FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

lint: ## go vet, staticcheck, gofmt, buf lint
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^proto/gen/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@test -x $(GOBIN)/buf || $(MAKE) --no-print-directory tools
	$(GOBIN)/buf lint

tools: ## install the pinned code generators and buf
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	$(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

proto: ## regenerate proto/gen from proto/
	@test -x $(GOBIN)/buf && test -x $(GOBIN)/protoc-gen-go && test -x $(GOBIN)/protoc-gen-go-grpc || $(MAKE) --no-print-directory tools
	$(GOBIN)/buf lint
	rm -rf proto/gen && $(GOBIN)/buf generate

proto-check: proto ## fail when the committed generated code is not current
	@git diff --exit-code --stat -- proto/gen && test -z "$$(git status --porcelain -- proto/gen)" || { echo "proto/gen is stale: run make proto and commit"; exit 1; }

# The Python SDK (sdk/python) runs on Debian's packages: python3-grpcio,
# python3-protobuf; its stubs come from Debian's protoc and
# grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc), which match
# those runtimes. Debian's interpreter is named explicitly: a python3 earlier
# on PATH (pyenv) may lack grpc.
PYTHON ?= /usr/bin/python3
PROTOC ?= /usr/bin/protoc
GRPC_PYTHON_PLUGIN ?= /usr/bin/grpc_python_plugin
SDK_PY_GEN := sdk/python/agentd/v1

sdk-python-gen: ## regenerate the Python SDK's stubs (sdk/python/agentd/v1) with Debian's protoc and grpc_python_plugin
	rm -rf $(SDK_PY_GEN) && mkdir -p $(SDK_PY_GEN)
	$(PROTOC) -I proto --python_out=sdk/python --pyi_out=sdk/python --grpc_python_out=sdk/python \
		--plugin=protoc-gen-grpc_python=$(GRPC_PYTHON_PLUGIN) proto/agentd/v1/*.proto
	printf '"""Generated gRPC stubs of the agentd.v1 proto package (make sdk-python-gen; do not edit)."""\n' > $(SDK_PY_GEN)/__init__.py

sdk-python-check: sdk-python-gen ## fail when the committed Python stubs are not current
	@git diff --exit-code --stat -- $(SDK_PY_GEN) && test -z "$$(git status --porcelain -- $(SDK_PY_GEN))" || { echo "$(SDK_PY_GEN) is stale: run make sdk-python-gen and commit"; exit 1; }

test-python: ## the Python SDK's tests (Debian's python3) against a real hub, agentd and builtin sandbox, plus mypy --strict
	$(GO) test -race -count=1 -timeout 10m -v ./sdk/python/sdktest/

bench: build ## benchmarks: Go benchmarks plus side-by-side comparisons (see docs/performance.md)
	bash scripts/bench.sh

bench-hub: build ## the hub's benchmarks: exec and stdout through the hub against ssh, idle tunnels, reconnect
	bash scripts/bench-hub.sh

bench-sandbox: ## the sandboxes' benchmarks on the local Docker engine: cold, warm-pool, paused and stopped first exec against docker run + exec and the cold path, exec against a paired machine, a fork's copy against cp -a
	bash scripts/bench-sandbox.sh

demo: build ## a hub, a paired agentd and a scripted chat session, all on loopback
	bin/agenthub demo --exit

demo-local: build ## agentd on a temp socket (no hub) and a scripted agentctl session against it
	bash scripts/demo.sh

CROSS_TARGETS ?= linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
cross: ## go vet (type-checks code and tests) for every other platform agentd ships for
	@set -e; for t in $(CROSS_TARGETS); do echo "go vet $$t"; GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./...; done

dist-tools: ## install the pinned nfpm (the .deb/.rpm packager; a tool, not a library in go.mod)
	$(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

dist: ## reproducible release archives, .deb/.rpm and SHA256SUMS under dist/ (see packaging/README.md)
	@$(GO) version -m $(GOBIN)/nfpm 2>/dev/null | grep -q 'goreleaser/nfpm/v2[[:space:]]*$(NFPM_VERSION)[[:space:]]' || $(MAKE) --no-print-directory dist-tools
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' DATE='$(DATE)' LDFLAGS='$(LDFLAGS)' BUILD_TAGS='$(BUILD_TAGS)' NFPM=$(GOBIN)/nfpm bash scripts/dist.sh

package-test: ## check what make dist built: package contents, install.sh, the .deb in a Debian container
	bash scripts/test-packages.sh

sandbox-base: ## the sandbox images ghcr.io/devdepot-ai/sandbox-base:1 and agentd-test/minimal:1, built locally (debootstrap, no registry; root); FORCE=1 rebuilds
	bash scripts/sandbox-base.sh $(if $(FORCE),--force)

sandbox-runtime: ## gVisor: install Debian's runsc and register it with the local Docker engine as runtime runsc (daemon.json + SIGHUP, never a restart; root; idempotent)
	bash scripts/sandbox-runtime.sh

k8s-up: ## a real single-node Kubernetes cluster here (builds tools/k8s into .cache/k8s once; root; loopback + a private bridge); prints the export line to paste; K8S_NETPOL=0: no NetworkPolicy enforcer
	bash scripts/k8s-up.sh

k8s-down: ## stop what k8s-up started (by pid; the enforcer's chains and ipsets removed), unmount its volumes, remove its bridge; nothing left running
	bash scripts/k8s-down.sh

k8s-smoke: ## against a cluster from k8s-up: node Ready, a sandbox-base Pod prints id -u through kubectl logs, a hostPath PV bound and written
	bash scripts/k8s-smoke.sh

test-kube: ## against a cluster from k8s-up (AGENTD_KUBECONFIG): the kube driver's tests and the hub's sandbox e2e tests on it, -race; prints the export line when no cluster answers
	bash scripts/test-kube.sh

clean:
	rm -rf bin dist

.PHONY: k8s-node-add k8s-node-remove
K8S_NODE ?= agentd-k8s-2

k8s-node-add: ## a second node (K8S_NODE, default agentd-k8s-2) for the cluster of k8s-up, on this machine: its own containerd and kubelet, tainted agentd.test/second-node=true:NoSchedule; no NetworkPolicy enforcer on it (root)
	bash scripts/k8s-node.sh add $(K8S_NODE)

k8s-node-remove: ## remove the node k8s-node-add made (by pid; the Node object, mounts, bridge, cgroups, state): nothing left
	bash scripts/k8s-node.sh remove $(K8S_NODE)
