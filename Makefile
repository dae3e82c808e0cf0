# dnscamp: the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PY := .venv/bin/python
DNSCAMP := .venv/bin/dnscamp
PYTEST_ARGS ?=
# rustup's cargo may not be on a non-login PATH; the same target dir as install/30-linkem.sh
CARGO := $(shell command -v cargo || echo $$HOME/.cargo/bin/cargo)
LINKEM_TARGET := $${XDG_CACHE_HOME:-$$HOME/.cache}/dnscamp/linkem-target

.PHONY: deps demo test bench docs clean-testbed

deps:
	@bash install/run.sh

## demo: the default campaign on the testbed, into the embedded Postgres, ending with the report
demo: deps
	$(DNSCAMP) db up
	$(DNSCAMP) campaign run campaigns/default.toml --run demo-$$(date -u +%Y%m%dT%H%M%SZ)

## test: everything but the opt-in internet/atlas-live tests: linkem's Rust tests, then pytest
test: deps
	cd testbed/linkem && CARGO_TARGET_DIR=$(LINKEM_TARGET) $(CARGO) test --locked -j2 --quiet
	$(PY) -m pytest -m "not internet and not atlas" $(PYTEST_ARGS)

## bench: benchmark figures (printed; copy them into docs/benchmarks.md)
bench: deps
	$(PY) bench/run_all.py

## docs: regenerate generated docs (JSON Schema of records, CLI reference)
docs: deps
	$(PY) -m dnscamp.docgen
