# vbt: `make run` and `make test` are the whole set-up on a fresh Debian
# machine with the Swift toolchain; both install what is missing first.
SWIFT   ?= swift
PYTHON  ?= python3
BIN_DIR  = $(shell $(SWIFT) build --show-bin-path)

.PHONY: deps build test test-swift test-python run bench clean

deps:
	@bash scripts/deps.sh

build: deps
	$(SWIFT) build

test: build
	$(SWIFT) build --build-tests
	VBT_BIN_DIR=$(BIN_DIR) $(SWIFT) test --skip-build
	VBT_BIN_DIR=$(BIN_DIR) $(PYTHON) -m pytest -q tests/python

run: build
	@bash scripts/run.sh $(BIN_DIR)

bench: deps
	$(SWIFT) build -c release --product vbt-bench
	$(shell $(SWIFT) build -c release --show-bin-path)/vbt-bench

clean:
	rm -rf .build
