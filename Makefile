# One target per developer action. Each one sets up what it needs first (scripts/setup.sh is
# idempotent: a second run does nothing).
VENV := .venv/bin

.PHONY: setup demo up lint test unit integration bench clean

setup:
	bash scripts/setup.sh

demo: setup
	$(VENV)/strata demo

up: setup
	$(VENV)/strata up

lint: setup
	$(VENV)/ruff check .

test: setup lint
	$(VENV)/python -m pytest tests

unit: setup
	$(VENV)/python -m pytest tests/unit

integration: setup
	$(VENV)/python -m pytest tests/integration

bench: setup
	$(VENV)/python -m bench

clean:
	rm -rf .strata
