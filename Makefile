# One target per developer action. Each one sets up what it needs first (scripts/setup.sh is
# idempotent: a second run does nothing).
VENV := .venv/bin

.PHONY: setup demo up lint check test test-deps unit integration bench docs clean

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/strata demo

up: setup
	$(VENV)/strata up

# ruff, and mypy in strict mode on the packages pyproject.toml lists: about 10 s without mypy's
# cache (a clean clone), under 1 s with it.
lint: setup
	$(VENV)/ruff check .
	$(VENV)/mypy

# While working: lint, then the unit and contract tests (no broker, no Spark) in two processes
# (pytest-xdist), the property tests with a quarter of their examples (hypothesis profile dev).
# About 50 s on this 2-core machine when it is quiet (load under 2), 65 s beside others' work.
check: lint test-deps
	STRATA_HYPOTHESIS_PROFILE=dev $(VENV)/python -m pytest -n 2 tests/unit tests/contract

# Every tier: the unit and contract tests in two processes with the property tests' full runs,
# then the integration and reliability tiers on the embedded SQLite store, then those two again
# with every stack on PostgreSQL, each in two processes given whole files (a module's stacks and
# browser are made once). The first step takes about 50 s; the integration and reliability
# tiers take the rest (tests/README.md).
test: setup lint test-deps
	$(VENV)/python -m pytest -n 2 tests/unit tests/contract
	$(VENV)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder tests/integration tests/reliability
	STRATA_TEST_STORE=postgresql $(VENV)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder tests/integration tests/reliability

test-deps:
	bash scripts/test-deps.sh

# The unit tier alone, in two processes, the property tests' full runs: about 30 s.
unit: setup
	$(VENV)/python -m pytest -n 2 tests/unit

integration: setup
	$(VENV)/python -m pytest tests/integration

bench: setup
	$(VENV)/python -m bench

# The documentation site (docs/, mkdocs.yml) into site/. --strict: a broken link, page or API
# reference fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/mkdocs build --strict

clean:
	rm -rf .strata
