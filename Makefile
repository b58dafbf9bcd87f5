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

# ruff, and mypy in strict mode on events, producers, projector, sdk and stack (pyproject.toml).
lint: setup
	$(VENV)/ruff check .
	$(VENV)/mypy

# While working: lint, then the unit and contract tests (no broker, no Spark), in under 2 minutes.
check: lint test-deps
	$(VENV)/python -m pytest tests/unit tests/contract

# The whole suite on the embedded SQLite store, then the integration and reliability tiers again
# with every stack on PostgreSQL.
test: setup lint test-deps
	$(VENV)/python -m pytest tests
	STRATA_TEST_STORE=postgresql $(VENV)/python -m pytest tests/integration tests/reliability

test-deps:
	bash scripts/test-deps.sh

unit: setup
	$(VENV)/python -m pytest tests/unit

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
