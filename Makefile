# mce — SageMaker-style multi-container endpoints, multi-model endpoints and inference components on your own
# Docker engine (containers/docker) or Kubernetes cluster (containers/kubernetes).
#
#   make demo    a real endpoint with the example containers, invoked, printed, cleaned up
#   make test    every test: unit, Docker integration, real AWS clients (Go SDK, boto3, aws CLI), a real
#                Kubernetes cluster (make kube), compose
#   make quick   the loop without Docker: every test that needs no Docker engine, in a few minutes
#   make bench   mce vs straight-to-container vs nginx, at 1/50/200 clients
#   make check-images   mce check on every example image (examples/containers/check.tsv)
#   make bench-loadtest   mce loadtest against Locust (boto3) and its own ceiling, two runs (bench/README.md)
#   make soak    200 signed clients for 10 minutes on Direct and Serial endpoints; zero failures, RSS sampled
#
# Go builds the host with cgo (go-nvml); these flags silence go-nvml's warnings.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
GO        ?= go
BIN       := bin/mce
GOFILES   := $(shell find . -name '*.go' -not -path './build/*' 2>/dev/null)
# The version mce --version prints: the commit (and tag) the binary was built from;
# Go's own VCS stamp is off where GOFLAGS carries -buildvcs=false.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
TESTFLAGS ?= -race -count=1 -timeout 20m
# Every stage of `make test` runs under it, so a run ends with the time each took (scripts/stagetime.sh).
T         := scripts/stagetime.sh

.PHONY: all quick build images framework-images models framework-models deps versitygw demo test unit vet fmt-check e2e e2e-and-kube compose-test bench soak bench-loadtest clean check-images kube-test kube kube-bin kube-image

all: build

build: $(BIN)

$(BIN): $(GOFILES) go.mod go.sum
	$(T) build $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/mce

images:
	$(T) images scripts/images.sh

# mce-framework/{sklearn,pytorch}:latest, SageMaker's framework serving contract on Debian's packages
# (examples/containers/framework); the Debian bases are built once per machine (scripts/framework-base.sh).
framework-images:
	$(T) framework-images scripts/framework-images.sh

models:
	$(T) models scripts/models.sh build/models

# mce check on every image of examples/containers/check.tsv, with its model data and sample input.
check-images: build images models framework-images framework-models
	scripts/mme-models.sh build/mme-models >/dev/null
	scripts/check-images.sh

# The real-framework examples' models, trained in the framework base images (cached by their inputs).
framework-models:
	$(T) framework-models scripts/framework-models.sh

# Debian packages the tests and the demo use; installed when missing (as root). And versitygw, a real S3 server.
deps:
	$(T) deps scripts/deps.sh

# versitygw alone (go install, once per machine; no root): the S3 tests and examples/s3's README use it.
versitygw:
	$(T) versitygw scripts/deps.sh versitygw

demo: deps build framework-images framework-models
	scripts/demo.sh

vet:
	$(T) vet $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The loop without Docker: go test -short skips every test that needs a Docker engine (testenv.NeedDocker)
# and builds no image, so it passes on a machine with no engine (DOCKER_HOST pointing nowhere included).
quick:
	$(GO) test -short -count=1 ./...

# build: the README snippet test (internal/docsnippets) runs bin/mce; kube-image: mce's own image, which compose/README.md's
# snippet builds too — built here, before the tests run in parallel, so the snippet finds it made and its 300 s wait for
# the endpoints is not spent compiling mce beside the race-enabled tests (a fresh clone's CI timed out so)
# UNIT_FIRST: go test starts packages in the order named, UNIT_P at a time; the slowest (measured per package at the
# end of each CI run) go first, so that none of them starts last and runs alone at the end.
UNIT_FIRST ?= ./internal/docsnippets ./host ./cmd/mce ./examples/containers/framework ./containers/check ./containers/docker
# UNIT_P: one package more than cores (go test's own default is as many as cores). The packages wait on Docker and
# their containers for a third of their time: on two cores, two at a time kept the machine 67 % busy and took 646 s
# warm, three at a time 83 % and 473 s (docs/performance.md, "The test suite's own time").
UNIT_P ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1) + 1 )))

unit: build images kube-image models framework-images framework-models versitygw
	GO=$(GO) $(T) unit scripts/unit-test.sh -p $(UNIT_P) $(TESTFLAGS) $(UNIT_FIRST) ./...
	$(T) alloc-budget $(GO) test -count=1 -run 'AllocationBudget' ./host/   # allocations are gated without -race

e2e: deps build images models framework-images
	$(T) e2e e2e/run.sh

# mce itself as a docker-compose service (join mode, static image).
compose-test: deps images models
	$(T) compose-test compose/test.sh

# e2e and kube (the cluster tests, then kube-e2e) side by side, each printed whole when it ends: alone on two cores
# each waits on its containers or its cluster much of its time (the machine 55 % busy through e2e, 34 % through
# kube-e2e). kube's clusters live in network namespaces of their own, e2e's mce and containers on loopback.
e2e-and-kube:
	@$(MAKE) --no-print-directory -j2 --output-sync=target e2e kube

test: deps fmt-check vet unit e2e-and-kube compose-test
	@$(T) report

# The Kubernetes engine on real single-node clusters (root): the pinned Kubernetes binaries, built once per
# machine into /var/cache/mce (about 12 min cold, seconds after), and mce's own image for the init containers.
kube-bin:
	$(T) kube-bin scripts/kube/build.sh >/dev/null

# MCE_KUBE_MCE_IMAGE names another build of mce's image (scripts/images.sh with MCE_IMAGES_TAG) and skips this one.
kube-image:
	@if [ -z "$$MCE_KUBE_MCE_IMAGE" ]; then $(T) kube-image scripts/images.sh mce; fi

# The Go cluster tests (each starts its own cluster; `make unit` skips them without MCE_KUBE_TEST).
kube-test: deps build images kube-bin kube-image
	MCE_KUBE_TEST=1 $(T) kube-test $(GO) test -count=1 -timeout 30m ./internal/kubetest ./containers/kubernetes ./cmd/mce -run 'TestClusterUpDown|TestOnCluster|TestServeOnKubernetes|TestMultiModelOnCluster|TestMultiModelThroughHost'

# Part of make test: the Go cluster tests, then the end-to-end test on one cluster with boto3 and the aws CLI
# (e2e/kube.sh: Direct, Serial, GPUs, scaling, an update under traffic, restarts, multi-model, deletion).
kube: kube-test
	$(T) kube-e2e e2e/kube.sh

bench: deps build images
	scripts/bench.sh

# Not part of `make test`: it runs for SOAK_DURATION (default 10m).
bench-loadtest: deps build images
	scripts/bench-loadtest.sh

soak: build images
	scripts/soak.sh

clean:
	rm -rf bin build
