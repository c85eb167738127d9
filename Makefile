# Makefile for tdmpi: install, build, run, test and benchmark, on one machine with mpirun,
# inside a private single-node Slurm, and across the nodes of a local multi-node cluster
# (network namespaces). `make help` lists the targets.
#
# On a fresh Debian 12 machine, as root, with Go and gcc:
#   make run    installs Open MPI if missing, runs examples/$(MAIN_EXAMPLE) on 2 ranks
#   make test   installs Open MPI, Slurm, munge and iproute2 if missing, runs the whole test suite
#
# Every variable below can be set on the command line: make test FUZZTIME=10s.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
# MPI jobs share two cores: never run two recipes at once, even under make -j.
.NOTPARALLEL:
.SUFFIXES:

# Open MPI refuses to run as root without these two (containers, CI); the third lets
# -np exceed the core count. Exported to every recipe, go test -exec and sbatch jobs.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1

GO ?= go
# Where built programs go: $(BIN)/examples/NAME.
BIN ?= bin
export TDMPI_BIN := $(BIN)

# The example `make run` builds and starts, a folder under examples/, and its rank count.
MAIN_EXAMPLE ?= initremote
RUN_NP ?= 2
# The example the Slurm jobs of slurm-test run.
SLURM_EXAMPLE ?= $(MAIN_EXAMPLE)

# Packages whose tests use MPI; they also run under mpirun. Patterns that match nothing
# yet are dropped, so the list may name packages still being written.
MPI_PKGS ?= ./mpi/... ./group/... ./internal/mpitest/... ./internal/xfer/... ./internal/coll/... ./tensordict/... ./test/...
# Packages whose tests also run once with BIG_ENV set (large messages, np 2).
BIG_PKGS ?= ./mpi/... ./tensordict/...
# GLIBC_TUNABLES: Open MPI's collectives malloc temporary buffers as large as
# the message, and glibc then advises them to use transparent huge pages:
# TestBigCollectives (2.5 GiB) took 30 s without it, 6.5 s with it, most of
# it faulting in 4 KiB pages. (glibc 2.35 and later; others ignore it.)
BIG_ENV ?= TDMPI_BIG=1 GLIBC_TUNABLES=glibc.malloc.hugetlb=1
# Seconds mpirun allows one package's big tests (they move gigabytes).
BIG_TIMEOUT ?= 900
# staticcheck, pinned, run from the module proxy by make lint.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Packages the test-suite job of slurm-test runs, and with which launcher (srun or mpirun).
SLURM_TEST_PKGS ?= ./mpi/... ./group/... ./tensordict/...
SLURM_TEST_LAUNCH ?= srun

# Packages the test-suite jobs of cluster-test run across 2 nodes (srun on 2 ranks, then
# mpirun on 4), with which go test flags, and the node count of cluster-up. (./test/...
# is not among them: its tests start MPI jobs of their own; its TestCluster* run from
# the host instead.)
CLUSTER_TEST_PKGS ?= ./mpi/... ./group/... ./internal/mpitest/... ./tensordict/...
CLUSTER_TEST_GOFLAGS ?= -short
CLUSTER_NODES ?= 2

# Packages whose tests run in the build without cgo (make test-nocgo): MPI is absent
# there, so their tests that need it skip, saying why. With cgo on and -tags nompi,
# test-nocgo only builds and vets: every build constraint of the module pairs cgo
# with nompi (cgo && !nompi, !cgo || nompi), so the tests would build the same files.
NOCGO_PKGS ?= ./mpi/... ./tensor/... ./memmap/... ./internal/... ./cmd/tdmpi/... ./tensordict/...

# MPICH, the second MPI family (Debian's mpich, libmpich-dev): programs built with
# -tags mpich, launched by MPICH's own mpiexec (Hydra; mpirun stays Open MPI's). The
# *-mpich targets run these packages' tests at MPICH_NPS on shared memory, and at
# np 2 over TCP (MPICH_TEST_TCP; test/ is left out: its tests start Open MPI jobs
# of their own).
MPICH_PKGS ?= ./mpi/... ./group/... ./internal/mpitest/... ./internal/xfer/... ./internal/coll/... ./tensordict/...
MPICH_MPIEXEC ?= mpiexec.hydra
# Rank counts of test-mpich's shared-memory runs. (np 4 once hung: a test broadcast
# over the world that two ranks skipped, which Open MPI let pass and MPICH does not.)
MPICH_NPS ?= 2 4
# Debian 12's MPICH 4.0.2 with UCX 1.13 hangs in MPI_Finalize over UCX's TCP
# transport: a 10-line C program (Init_thread, Comm_dup, Allreduce, Comm_free,
# Finalize) hung in 26 of 560 runs here (one rank spinning in ucp_worker_progress
# while disconnecting, the other in the PMI barrier), 1 of 250 on shared memory. No
# UCX or MPICH setting tried avoided it (docs/running.md, "A known MPICH problem").
# test-mpich runs its tests through hpc/scripts/mpich-exec.sh, which counts a job
# whose ranks all passed and whose finalize then hung as passed, saying so; so its
# TCP run is on (MPICH_TEST_TCP=0 leaves it out). The examples print no such mark, so their TCP
# run stays opt-in (MPICH_EXAMPLES_TCP=1).
MPICH_TEST_TCP ?= 1
MPICH_EXAMPLES_TCP ?= 0
# Forces MPICH's UCX transport onto TCP over loopback.
MPICH_TCP_FLAGS ?= -genv UCX_TLS tcp,self
# The packages of slurm-test-mpich's test-suite job (srun --mpi=pmi2).
MPICH_SLURM_TEST_PKGS ?= ./mpi/... ./group/...

# Rank counts for the MPI test runs (4 is oversubscribed on two cores).
TEST_NPS ?= 2 4
MPIRUN ?= mpirun
# Seconds mpirun lets one test binary or program run before aborting the job.
MPI_TIMEOUT ?= 300
# Seconds mpirun lets one example run (make run, make examples).
EXAMPLE_TIMEOUT ?= 60
# Seconds one whole step (a go test command) may take before timeout kills it.
STEP_TIMEOUT ?= 1200
# --bind-to none: a rank bound to one core sees GOMAXPROCS=1.
MPIEXEC = $(MPIRUN) --bind-to none --timeout $(MPI_TIMEOUT)
# Forces Open MPI onto TCP over loopback: the path messages take between nodes.
TCP_FLAGS ?= --mca btl self,tcp --mca btl_tcp_if_include lo
export TDMPI_TCP_FLAGS := $(TCP_FLAGS)
# Time each fuzz target runs in `make fuzz` and `make test` (13 targets: about 110 s
# at 3s, most of it their builds; make test must stay under 30 min, and its last full
# run took 1905 s with 5s). Fuzz longer by hand: make fuzz FUZZTIME=60s.
FUZZTIME ?= 3s
# go test flags for the single-process benchmarks of every package.
BENCH ?= .
BENCHTIME ?= 1s
# The two-rank benchmarks (run under mpirun -np 2 in MPI_PKGS) need the same b.N
# on both ranks, so a fixed count.
MPI_BENCH ?= PingPong|Remote|Collective
MPI_BENCHTIME ?= 20x
# `make bench` also runs `tdmpi bench TDMPI_BENCH_ARGS` under mpirun -np 2 when
# TDMPI_BENCH is not empty: by default, once cmd/tdmpi/main.go exists. Its table
# goes to BENCH_OUT.txt, its CSV to BENCH_OUT.csv, and tools/benchplot (a module
# of its own, so that the plotting library stays out of tdmpi's go.mod) draws
# BENCH_OUT.png from the CSV.
TDMPI_BENCH ?= $(wildcard cmd/tdmpi/main.go)
BENCH_OUT ?= $(BIN)/tdmpi-bench
TDMPI_BENCH_ARGS ?= -out $(BENCH_OUT)
# Modules nested in this repository, each with its own go.mod: make lint and
# make test-unit run in each of them too.
NESTED_MODULES ?= tools/benchplot
# Which packages (alone, then MPI_PKGS under mpirun) and tests `make race` runs.
RACE_PKGS ?= ./...
RACE_RUN ?= .

# The steps of `make test`, in order. All run; the summary names the failures.
TEST_STEPS ?= test-unit test-nocgo test-mpi test-tcp test-mpich test-race test-big examples examples-mpich \
	torchpeer slurm-test slurm-test-mpich cluster-test fuzz lint

# Where make test keeps each step's output, and which of its lines (grep -E), at most how
# many per failed step, it shows again after the summary: a CI log's tail then says
# which test failed and why.
TEST_LOGS ?= $(BIN)/test-logs
TEST_FAIL_LINES ?= ^(\s*--- FAIL|FAIL|panic:)|^\s+(Error:|Messages:)|^(cluster|slurm)-test: .*(failed|want )|ended with JobState=(FAILED|TIMEOUT)|timed out|time limit|: FAIL in
TEST_FAIL_TAIL ?= 10

# Debian packages: for building and running MPI programs, and for the local Slurm.
DEPS_MPI := openmpi-bin libopenmpi-dev pkg-config
DEPS_SLURM := slurm-wlm munge
# For the local multi-node cluster (network namespaces, nsenter) and the tests (pgrep).
DEPS_CLUSTER := iproute2 util-linux procps
# MPICH installs beside Open MPI; mpirun and mpiexec stay Open MPI's (alternatives).
DEPS_MPICH := mpich libmpich-dev
# For the benchmark baselines of `make bench` and `make bench-fresh` (mpi4py + numpy).
DEPS_BENCH := python3-mpi4py python3-numpy
# Debian's python3, which has the DEPS_BENCH modules (a pyenv python3 on PATH may not).
BENCH_PYTHON ?= /usr/bin/python3
# Rounds of `make bench-fresh`.
FRESH_ROUNDS ?= 3

# pkgs_of turns package patterns into the import paths that exist now.
pkgs_of = $(filter-out ./% .,$(shell $(GO) list -e $(1) 2>/dev/null))
timeout = timeout -k 10 $(STEP_TIMEOUT)
# go test under mpirun: one package at a time (-p 1), so jobs do not share the cores.
# $(call mpi_test,PACKAGES,MPIRUN-FLAGS[,MPIRUN-TIMEOUT]); go test's own -timeout is set
# above mpirun's so that mpirun, which reports which ranks hung, fires first.
mpi_test = $(timeout) $(GO) test -count=1 -p 1 -timeout $$(( $(or $(3),$(MPI_TIMEOUT)) + 60 ))s \
	-exec "$(MPIRUN) --bind-to none --timeout $(or $(3),$(MPI_TIMEOUT)) $(2)" $(1)
# The same under MPICH: $(call mpich_test,PACKAGES,MPIEXEC-FLAGS); Hydra's time limit is
# MPIEXEC_TIMEOUT, and GOFLAGS carries the build tag to go test.
# hpc/scripts/mpich-exec.sh runs MPICH_MPIEXEC and tells MPICH's finalize hang (every
# rank passed, then MPI_Finalize never returned) from a failure, saying so loudly.
mpich_test = GOFLAGS=-tags=mpich MPIEXEC_TIMEOUT=$(MPI_TIMEOUT) MPICH_MPIEXEC=$(MPICH_MPIEXEC) $(timeout) $(GO) test -count=1 -p 1 \
	-timeout $$(( $(MPI_TIMEOUT) + 60 ))s -exec "$(CURDIR)/hpc/scripts/mpich-exec.sh $(2)" $(1)

.PHONY: help
help: ## list the targets
	@echo "usage: make TARGET [VARIABLE=value ...]"
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | \
		awk -F ':.*## ' '{ printf "  %-14s %s\n", $$1, $$2 }'
	@echo "variables: MAIN_EXAMPLE=$(MAIN_EXAMPLE) MPI_PKGS='$(MPI_PKGS)' FUZZTIME=$(FUZZTIME) TEST_NPS='$(TEST_NPS)'"

.PHONY: deps
deps: ## install Open MPI and pkg-config with apt-get, if missing
	@command -v $(GO) >/dev/null || { echo "make: $(GO) not found; install Go 1.26 first" >&2; exit 1; }
	@hpc/scripts/deps.sh $(DEPS_MPI)

.PHONY: deps-all
deps-all: ## install Open MPI, MPICH, pkg-config, Slurm, munge, iproute2 and procps with apt-get, if missing
	@command -v $(GO) >/dev/null || { echo "make: $(GO) not found; install Go 1.26 first" >&2; exit 1; }
	@hpc/scripts/deps.sh $(DEPS_MPI) $(DEPS_MPICH) $(DEPS_SLURM) $(DEPS_CLUSTER)

.PHONY: deps-mpich
deps-mpich: ## install MPICH (beside Open MPI) and pkg-config with apt-get, if missing
	@hpc/scripts/deps.sh $(DEPS_MPICH) pkg-config

.PHONY: build
build: deps ## go build and go vet every package
	$(GO) build ./...
	$(GO) vet ./...

.PHONY: run
run: deps ## build examples/MAIN_EXAMPLE and run it with mpirun -np RUN_NP
	@mkdir -p $(BIN)/examples
	$(GO) build -o $(BIN)/examples/$(MAIN_EXAMPLE) ./examples/$(MAIN_EXAMPLE)
	timeout -k 10 $$(( $(EXAMPLE_TIMEOUT) + 30 )) $(MPIRUN) -np $(RUN_NP) --bind-to none \
		--timeout $(EXAMPLE_TIMEOUT) $(BIN)/examples/$(MAIN_EXAMPLE)

.PHONY: test
test: deps-all ## install what is missing, then run every step of TEST_STEPS
	@t0=$$SECONDS; failed=(); times=(); mkdir -p $(TEST_LOGS); \
	for step in $(TEST_STEPS); do \
		s=$$SECONDS; echo "=== make $$step"; \
		if $(MAKE) --no-print-directory $$step 2>&1 | tee $(TEST_LOGS)/$$step.log; then r=ok; else r=FAIL; failed+=("$$step"); fi; \
		times+=("$$(printf '%-5s %-12s %4d s' $$r $$step $$((SECONDS - s)))"); \
	done; \
	echo "=== test summary (each step's output: $(TEST_LOGS)/STEP.log)"; printf '  %s\n' "$${times[@]}"; \
	for step in $${failed[@]+"$${failed[@]}"}; do \
		echo "=== why $$step failed (the last of its failure lines)"; \
		grep -E "$(TEST_FAIL_LINES)" $(TEST_LOGS)/$$step.log | tail -n $(TEST_FAIL_TAIL) | cut -c 1-300 || true; \
	done; \
	if (( $${#failed[@]} )); then echo "=== FAIL: $${failed[*]} ($$((SECONDS - t0)) s)"; exit 1; fi; \
	echo "=== PASS ($$((SECONDS - t0)) s)"

.PHONY: test-unit
test-unit: ## go test every package as a single process (MPI singleton), internal/codec's jsontext oracle (GOEXPERIMENT=jsonv2), and NESTED_MODULES
	$(timeout) $(GO) test -count=1 ./...
	GOEXPERIMENT=jsonv2 $(timeout) $(GO) test -count=1 -run 'Oracle|Readers' ./internal/codec
	@for m in $(NESTED_MODULES); do echo "--- $$m"; (cd $$m && $(timeout) $(GO) test -count=1 ./...); done

.PHONY: test-nocgo
test-nocgo: ## CGO_ENABLED=0: build, vet, go test NOCGO_PKGS (no MPI); then -tags nompi with cgo: build, vet, no C left
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(timeout) $(GO) test -count=1 $(NOCGO_PKGS)
	CGO_ENABLED=1 $(GO) build -tags nompi ./...
	CGO_ENABLED=1 $(GO) vet -tags nompi ./...
	@c=$$(CGO_ENABLED=1 $(GO) list -tags nompi -f '{{if .CgoFiles}}{{.ImportPath}}{{end}}' ./...); \
	if [[ -n "$$c" ]]; then echo "test-nocgo: -tags nompi still builds C in:" $$c >&2; exit 1; fi

.PHONY: test-mpi
test-mpi: ## go test MPI_PKGS under mpirun at each rank count of TEST_NPS, shared memory
	@pkgs="$(call pkgs_of,$(MPI_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "test-mpi: no package of '$(MPI_PKGS)' exists yet"; exit 0; fi; \
	for np in $(TEST_NPS); do \
		echo "--- np $$np: $$pkgs"; \
		$(call mpi_test,$$pkgs,-np $$np); \
	done

.PHONY: test-tcp
test-tcp: ## go test MPI_PKGS under mpirun -np 2 over TCP (loopback)
	@pkgs="$(call pkgs_of,$(MPI_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "test-tcp: no package of '$(MPI_PKGS)' exists yet"; exit 0; fi; \
	echo "--- np 2 tcp: $$pkgs"; \
	$(call mpi_test,$$pkgs,-np 2 $(TCP_FLAGS))

.PHONY: test-mpich
test-mpich: deps-mpich ## go test MPICH_PKGS built with -tags mpich under mpiexec.hydra: MPICH_NPS, then np 2 TCP
	@pkgs="$(call pkgs_of,$(MPICH_PKGS))"; \
	for np in $(MPICH_NPS); do \
		echo "--- mpich np $$np: $$pkgs"; \
		$(call mpich_test,$$pkgs,-np $$np); \
	done; \
	if [[ "$(MPICH_TEST_TCP)" == 1 ]]; then \
		echo "--- mpich np 2 tcp: $$pkgs"; \
		$(call mpich_test,$$pkgs,-np 2 $(MPICH_TCP_FLAGS)); \
	else \
		echo "--- mpich np 2 tcp: not run (MPICH_TEST_TCP=0)"; \
	fi

.PHONY: test-big
test-big: ## go test BIG_PKGS under mpirun -np 2 with BIG_ENV (large messages)
	@pkgs="$(call pkgs_of,$(BIG_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "test-big: no package of '$(BIG_PKGS)' exists yet"; exit 0; fi; \
	echo "--- np 2 $(BIG_ENV): $$pkgs"; \
	env $(BIG_ENV) $(call mpi_test,$$pkgs,-np 2,$(BIG_TIMEOUT))

.PHONY: examples-build
examples-build: deps ## build every examples/*/ program into BIN/examples/
	hpc/scripts/examples.sh build

.PHONY: examples
examples: deps ## run every example with its declared np (// np: N), shared memory and TCP
	TDMPI_MPI_TIMEOUT=$(EXAMPLE_TIMEOUT) hpc/scripts/examples.sh run

.PHONY: torchpeer
torchpeer: deps ## run examples/torchpeer with a PyTorch rank (both modes) where one exists, else say why not
	TDMPI_MPI_TIMEOUT=$(EXAMPLE_TIMEOUT) examples/torchpeer/run.sh

.PHONY: examples-mpich
examples-mpich: deps-mpich ## run every example built with -tags mpich under mpiexec.hydra, shared memory and TCP
	TDMPI_MPI=mpich TDMPI_MPI_TIMEOUT=$(EXAMPLE_TIMEOUT) TDMPI_MPICH_MPIEXEC=$(MPICH_MPIEXEC) TDMPI_EXAMPLES_TCP=$(MPICH_EXAMPLES_TCP) \
		TDMPI_MPICH_TCP_FLAGS="$(MPICH_TCP_FLAGS)" hpc/scripts/examples.sh run

.PHONY: fuzz
fuzz: ## fuzz every Fuzz target of the module for FUZZTIME each (found automatically)
	hpc/scripts/fuzz.sh $(FUZZTIME)

.PHONY: lint
lint: ## gofmt -l must print nothing; go mod tidy -diff, go vet and staticcheck in every module; bash -n on the shell scripts
	@out=$$(gofmt -l .); \
	if [[ -n "$$out" ]]; then echo "lint: gofmt would change:" >&2; echo "$$out" >&2; exit 1; fi
	@for m in . $(NESTED_MODULES); do \
		(cd $$m && $(GO) mod tidy -diff) || { echo "lint: $$m/go.mod or go.sum is not tidy: run go mod tidy there" >&2; exit 1; }; \
	done
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@for m in $(NESTED_MODULES); do echo "--- $$m"; (cd $$m && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...); done
	@for f in hpc/scripts/*.sh hpc/slurm/*.sbatch examples/*/*.sh .ci/run; do bash -n "$$f"; done

.PHONY: race
.PHONY: test-race
# Under -race a rank can keep the others waiting for its verdict on a test longer
# than mpitest's default 60 s (a test whose rank 0 ran a job of its own took over
# 60 s once on a busy host, when those still ran under mpirun).
RACE_AGREE_TIMEOUT ?= 150s

test-race: deps ## go test -race -short of MPI_PKGS under mpirun -np 2 (the concurrent tests)
	@pkgs="$(call pkgs_of,$(MPI_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "test-race: no package of '$(MPI_PKGS)' exists yet"; exit 0; fi; \
	TDMPI_TEST_AGREE_TIMEOUT=$(RACE_AGREE_TIMEOUT) $(timeout) $(GO) test -count=1 -race -short -p 1 -exec "$(MPIEXEC) -np 2" $$pkgs

race: deps ## go test -race: RACE_PKGS alone, then MPI_PKGS under mpirun -np 2
	$(timeout) $(GO) test -count=1 -race -run '$(RACE_RUN)' $(RACE_PKGS)
	@pkgs="$(call pkgs_of,$(MPI_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "race: no package of '$(MPI_PKGS)' exists yet"; exit 0; fi; \
	$(timeout) $(GO) test -count=1 -race -p 1 -run '$(RACE_RUN)' -exec "$(MPIEXEC) -np 2" $$pkgs

.PHONY: deps-bench
deps-bench: ## install Open MPI, pkg-config, mpi4py and numpy with apt-get, if missing
	@command -v $(GO) >/dev/null || { echo "make: $(GO) not found; install Go 1.26 first" >&2; exit 1; }
	@hpc/scripts/deps.sh $(DEPS_MPI) $(DEPS_BENCH)

.PHONY: bench-fresh
bench-fresh: deps-bench ## receives of 256 MiB into new memory: tdmpi (InitRemote, broadcast mode, Broadcast), C and mpi4py, interleaved FRESH_ROUNDS times
	@mkdir -p $(BIN)
	$(GO) test -c -o $(BIN)/tensordict.test ./tensordict
	@for r in $$(seq $(FRESH_ROUNDS)); do \
		echo "=== bench-fresh round $$r, load $$(cut -d' ' -f1 /proc/loadavg)"; \
		$(timeout) $(MPIEXEC) -np 2 $(BENCH_PYTHON) internal/bench/testdata/fresh_recv.py 256 5 || exit 1; \
		$(timeout) $(MPIEXEC) -np 2 $(BIN)/tensordict.test -test.run '^$$' -test.benchtime $(MPI_BENCHTIME) \
			-test.bench 'RemoteInit256MiB(vsC)?$$|RemoteBroadcast256MiB|CollectiveBroadcast256MiB' || exit 1; \
	done

.PHONY: bench
bench: deps-bench ## single-process benchmarks, then two-rank ones (MPI_BENCH) under mpirun -np 2, then tdmpi bench (BENCH_OUT.txt, .csv, .png), then the mpi4py baseline
	$(timeout) $(GO) test -count=1 -p 1 -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -benchmem ./...
	@pkgs="$(call pkgs_of,$(MPI_PKGS))"; \
	if [[ -z "$$pkgs" ]]; then echo "bench: no package of '$(MPI_PKGS)' exists yet"; exit 0; fi; \
	$(timeout) $(GO) test -count=1 -p 1 -run '^$$' -bench '$(MPI_BENCH)' -benchtime $(MPI_BENCHTIME) -benchmem \
		-exec "$(MPIEXEC) -np 2" $$pkgs
ifneq ($(TDMPI_BENCH),)
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/tdmpi ./cmd/tdmpi
	$(timeout) $(MPIEXEC) -np 2 $(BIN)/tdmpi bench $(TDMPI_BENCH_ARGS) | tee $(BENCH_OUT).txt
	$(MAKE) --no-print-directory bench-plot
endif
	$(timeout) $(MPIEXEC) -np 2 $(BENCH_PYTHON) internal/bench/testdata/fresh_recv.py 256 5

.PHONY: bench-plot
bench-plot: ## draw BENCH_OUT.png from BENCH_OUT.csv (tools/benchplot, a module of its own)
	cd tools/benchplot && $(GO) run . -title "tdmpi bench: np 2 on $$(hostname), $$(date +%F)" \
		-o "$(abspath $(BENCH_OUT)).png" "$(abspath $(BENCH_OUT)).csv"

.PHONY: slurm-up
slurm-up: ## start the private single-node Slurm (hpc/scripts/slurm-local.sh up)
	hpc/scripts/slurm-local.sh up
	@echo 'use it with: eval "$$(hpc/scripts/slurm-local.sh env)"'

.PHONY: slurm-down
slurm-down: ## stop the private Slurm and wait for its daemons to exit
	hpc/scripts/slurm-local.sh down

.PHONY: slurm-status
slurm-status: ## show the private Slurm's daemons and node
	hpc/scripts/slurm-local.sh status

.PHONY: slurm-test
slurm-test: deps-all ## sbatch the job scripts of hpc/slurm/ (srun and mpirun) and check them
	hpc/scripts/examples.sh build $(SLURM_EXAMPLE)
	TDMPI_SLURM_TEST_PKGS="$(call pkgs_of,$(SLURM_TEST_PKGS))" \
	TDMPI_SLURM_TEST_LAUNCH=$(SLURM_TEST_LAUNCH) \
		$(timeout) hpc/scripts/slurm-test.sh $(SLURM_EXAMPLE)

.PHONY: cluster-up
cluster-up: deps-all ## start the local multi-node cluster of CLUSTER_NODES nodes (hpc/scripts/cluster-local.sh up)
	hpc/scripts/cluster-local.sh up $(CLUSTER_NODES)
	@echo 'use it with: eval "$$(hpc/scripts/cluster-local.sh env)"'

.PHONY: cluster-down
cluster-down: ## stop the local cluster: daemons, processes, namespaces, links
	hpc/scripts/cluster-local.sh down

.PHONY: cluster-status
cluster-status: ## show the local cluster's daemons, nodes, links and exports
	hpc/scripts/cluster-local.sh status

.PHONY: cluster-test
cluster-test: deps-all ## examples, hpc/slurm/ jobs, CLUSTER_TEST_PKGS and the failure tests across 2 nodes
	TDMPI_CLUSTER_TEST_PKGS="$(call pkgs_of,$(CLUSTER_TEST_PKGS))" \
	TDMPI_CLUSTER_TEST_GOFLAGS="$(CLUSTER_TEST_GOFLAGS)" \
		$(timeout) hpc/scripts/cluster-test.sh

.PHONY: slurm-test-mpich
slurm-test-mpich: deps-all ## slurm-test for the MPICH build: srun --mpi=pmi2 and mpiexec.hydra in the allocation
	TDMPI_MPI=mpich hpc/scripts/examples.sh build $(SLURM_EXAMPLE)
	TDMPI_MPI=mpich TDMPI_SLURM_TEST_PKGS="$(call pkgs_of,$(MPICH_SLURM_TEST_PKGS))" \
	TDMPI_SLURM_TEST_LAUNCH=srun \
		$(timeout) hpc/scripts/slurm-test.sh $(SLURM_EXAMPLE)

.PHONY: clean
clean: ## remove built programs, job outputs and Go's test cache
	rm -rf $(BIN)
	rm -f tdmpi-*.out
	$(GO) clean -testcache
