# dnscamp: the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PY := .venv/bin/python
DNSCAMP := .venv/bin/dnscamp
PYTEST_ARGS ?=

.PHONY: deps demo test bench docs clean-testbed

deps:
	@bash install/run.sh

## demo: the default campaign on the testbed, into the embedded Postgres, ending with the report
demo: deps
	$(DNSCAMP) db up
	$(DNSCAMP) campaign run campaigns/default.toml --run demo-$$(date -u +%Y%m%dT%H%M%SZ)

## test: everything but the opt-in internet/atlas-live tests
test: deps
	$(PY) -m pytest -m "not internet and not atlas" $(PYTEST_ARGS)

## bench: benchmark figures (printed; copy them into docs/benchmarks.md)
bench: deps
	$(PY) bench/run_all.py

## docs: regenerate generated docs (JSON Schema of records, CLI reference)
docs: deps
	$(PY) -m dnscamp.docgen
