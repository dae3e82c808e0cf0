# dnscamp: the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PY := .venv/bin/python
DNSCAMP := .venv/bin/dnscamp
PYTEST_ARGS ?=
# the cargo install/30-linkem.sh builds with (rustup's may not be on a non-login PATH); same target dir
CARGO := $(shell bash -c 'source install/lib.sh && find_cargo' || echo cargo)
LINKEM_TARGET := $${XDG_CACHE_HOME:-$$HOME/.cache}/dnscamp/linkem-target

.PHONY: deps deps-demo lock demo test bench docs dashboards rehearse clean-testbed

## deps: every install step (what the tests and the fleet need too); deps-demo: what the demo runs
deps:
	@bash install/run.sh test

deps-demo:
	@bash install/run.sh demo

## lock: re-resolve requirements.lock (the venv's exact versions, hashed) after a pin in pyproject.toml moved
lock:
	@bash install/lock.sh

## demo: the default campaign on the testbed, into the embedded Postgres, ending with the report
## (installs what the demo runs only: no test extra, no fleet tools; install/run.sh)
DEMO_RUN := demo-$(shell date -u +%Y%m%dT%H%M%SZ)
REPORT_DIR = $$($(PY) -c 'from vantage_agent import paths; print(paths.home() / "report")')
demo: deps-demo
	$(DNSCAMP) db up
	$(DNSCAMP) campaign run campaigns/default.toml --run $(DEMO_RUN)
	@echo "report: $$($(DNSCAMP) report --html $(REPORT_DIR)/default --campaign default --run $(DEMO_RUN))"

## test: everything but the opt-in internet/atlas-live tests: linkem's Rust tests, then pytest on
## TEST_WORKERS workers, the island's tests on one of them (tests/conftest.py); the log ends with
## the 25 slowest tests: the budget is 15 minutes of pytest from a fresh clone on 2 cores.
## Three workers on two cores: many tests wait (the AWS provider's polling against moto, cron
## firings, emulated link delays), and a third worker runs CPU-bound tests meanwhile.
TEST_WORKERS ?= 3
test: deps
	cd testbed/linkem && CARGO_TARGET_DIR=$(LINKEM_TARGET) $(CARGO) test --locked -j2 --quiet
	$(PY) -m pytest -m "not internet and not atlas" -n $(TEST_WORKERS) --durations=25 $(PYTEST_ARGS)

## dashboards: regenerate the Grafana dashboards' JSON from dashboards/ (docs/dashboards.md)
dashboards: deps
	$(DNSCAMP) dashboards build

## rehearse: the fleet of campaigns/rehearsal.toml rehearsed on the testbed with faults: cron firings, S3 (cut for a while), collector, completeness (docs/pipeline.md)
rehearse: deps
	$(DNSCAMP) db up
	$(DNSCAMP) fleet rehearse campaigns/rehearsal.toml --faults

## bench: benchmark figures (printed; copy them into docs/benchmarks.md)
bench: deps
	$(PY) bench/run_all.py

## docs: regenerate generated docs (JSON Schema of records, CLI reference)
docs: deps
	$(PY) -m dnscamp.docgen
