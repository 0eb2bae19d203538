# vbt: `make run` and `make test` are the whole set-up on a fresh Debian
# machine with the Swift toolchain; both install what is missing first.
SWIFT   ?= swift
PYTHON  ?= python3
BIN_DIR  = $(shell $(SWIFT) build --show-bin-path)

.PHONY: deps build lint test test-fast test-swift test-python run bench soak install clean

deps:
	@bash scripts/deps.sh

build: deps
	$(SWIFT) build

# The pure and in-memory suites run apart from the process suites, so each
# reports its own real duration (a process suite's waits would hold the rest).
# The process suites run one at a time: beside the others on 2 cores, the bus's
# 100,000-message flood once left a subscriber a gap (3m15s so, 2m30s in parallel).
# The code follows .swift-format (`swift format -i -r Sources Tests Benchmarks Plugins` applies it).
# Then scripts/lint-assets.sh: the pages' scripts through ESLint, their style sheets through a CSS
# parser (scripts/lint_css.py); scripts/lint-history.sh: no comment, help or log text names a
# tracker's issue; and scripts/lint-commits.sh: every commit since the template follows it (CONTRIBUTING.md).
lint:
	$(SWIFT) format lint --strict -r Sources Tests Benchmarks Plugins Package.swift
	@bash scripts/lint-assets.sh
	@bash scripts/lint-history.sh
	@bash scripts/lint-commits.sh

test: build lint
	$(SWIFT) build --build-tests
	VBT_BIN_DIR=$(BIN_DIR) $(SWIFT) test --skip-build --skip '$(PROCESS_SUITES)'
	VBT_BIN_DIR=$(BIN_DIR) $(SWIFT) test --skip-build --no-parallel --filter '$(PROCESS_SUITES)'
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) -m pytest -q --durations=15 tests/python

# The quick loop on every change (warm: `make deps` has run once): the pure
# and in-memory Swift suites (runtimes over VBTTesting's MemoryBus) and the
# Python checks that start no long-lived process. The process suites and the
# end-to-end Python tests run in `make test`.
PROCESS_SUITES = BusProcessTests|SwapProcessTests|StationSplitTests|ShardProcessTests|SilentRecorderTests|BridgeProcessTests
test-fast: lint
	$(SWIFT) build --build-tests
	VBT_BIN_DIR=$(BIN_DIR) $(SWIFT) test --skip-build --skip '$(PROCESS_SUITES)'
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) -m pytest -q tests/python/test_posture_math.py tests/python/test_wire_roundtrip.py tests/python/test_layers.py

run: build
	@bash scripts/run.sh $(BIN_DIR)

# Then, with the release build of every program: what journalling costs a bridge
# replaying 1,000 stations (tests/python/journal_cost.py, about 3 minutes), and the
# recovery time after each kind of kill (about 3 minutes): the short fault run with
# 10 kills, 2 of each program, timed from each restart until every consumer logs
# `caught up`; its store compared with a clean run's too. Last, the coach console: a rep on
# the bus -> visible in a headless Chromium's DOM at 100 and 500 stations, beside a raw
# subscriber, and the console's CPU and memory (tests/python/console_bench.py, 2 minutes). Then the
# rack display: from the reading a bridge stamped that completed a rep to the rep on the bus, on a
# paired rack page in headless Chromium and the start of its sound, at 1 and 100 simulated stations
# against a whole installation (tests/python/rack_bench.py, about 2.5 minutes); then again with the
# other 99 stations one replay of a recording, their bridges off this machine as in a gym (about 4 minutes).
# Then the load test: make run's stations replayed at 9 and 1,000 stations against a
# whole installation, through vbt loadtest, the copies' starts spread over 2 s three times back
# to back, then all at once, then spread beside a CPU-bound vbt eval; each run with where its
# reps' time went, stage by stage (tests/python/loadtest_bench.py, about 15 minutes). Built as `make install` builds what a
# gym runs, with the static Swift standard library (a process maps none of the runtime's shared
# libraries: at 1,000 stations the rep-detector's RSS was 87-95 MB so, 99-104 MB built without).
# Last, the chain: 50 gyms of 20 stations uplinking at once to one PostgreSQL here, beside its
# own COPY of the same rows (tests/python/chain_bench.py, about 1.5 minutes).
REL_BIN_DIR = $(shell $(SWIFT) build -c release --show-bin-path)
# What a gym runs: the static Swift standard library (decision 0018), linked by lld with packed
# relative relocations (decision 0051: 1.3 MB less of each program resident, 1-4 MB less at peak).
RELEASE_BUILD = $(SWIFT) build -c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs
bench: deps
	$(RELEASE_BUILD)
	$(REL_BIN_DIR)/vbt-bench
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/journal_cost.py
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/fault_run.py --short --kills 10 --seed 2
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/console_bench.py --stations 100 500
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/rack_bench.py --stations 1 100
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/rack_bench.py --stations 1 100 --others replay
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/loadtest_bench.py --stations 9 1000 --repeat 3 --hog
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/partition_bench.py --partitions 10 30 120 --throttle-kbit 1000
	VBT_BIN_DIR=$(REL_BIN_DIR) $(PYTHON) tests/python/chain_bench.py --gyms 50 --stations 20

# The long fault run (about 10 minutes): a recording of 4 simulated stations
# (6 sets each) replayed as 20 stations at speed 1 into a clean and a faulted installation;
# in the faulted one 20 SIGKILLs of the recorder, detector, posture evaluator, notifier and
# bus at seeded random moments, each restarted 0.5-5 s later; the two stores compared.
# SOAK_SEED=N picks other moments; the databases and logs stay in the folder it prints.
# Then the long Wi-Fi chaos runs (about 8 minutes each, root, nft and tc): a 5-minute recording
# of 3 stations replayed at speed 1 by 3 station computers in network namespaces into a clean
# gym and one whose links drop 10 % of packets, one partitioned twice for 30 s, one throttled
# to 1 Mbit/s, one flapping; the stores compared. Once with the links alone, once with the
# bus SIGKILLed during the first partition. Last, a gym's link to the chain's PostgreSQL dropping
# every packet for 10 minutes while it trains on (root, nft; tests/python/chain_run.py, 11 minutes).
SOAK_SEED ?= 1
soak: build
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) tests/python/fault_run.py --kills 20 --stations 20 --seed $(SOAK_SEED)
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) tests/python/chaos_run.py --seed $(SOAK_SEED)
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) tests/python/chaos_run.py --kill-bus --seed $(SOAK_SEED)
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) tests/python/chain_run.py --cut-s 600

# Installs on this machine (deploy/README.md): ROLE=server, or ROLE=station
# STATIONS="rack-01 rack-02"; DESTDIR=DIR installs into a folder instead. The
# programs are built with the static Swift standard library: a station
# computer needs no Swift toolchain.
ROLE ?= server
STATIONS ?=
install: deps
	$(RELEASE_BUILD)
	bash deploy/install.sh --root $(or $(DESTDIR),/) --bin-dir $(REL_BIN_DIR) $(ROLE) $(STATIONS)

clean:
	rm -rf .build
