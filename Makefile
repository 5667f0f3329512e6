# Two commands do all the set-up on a fresh machine with only Python:
#   make demo   -- replay a real recorded session shipped with the project (no key, no network)
#   make test   -- the test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install demo test lint bench clients clean
install: $(BIN)/.installed

demo: install
	$(BIN)/contextwarden replay examples/data/demo-session.traj.json --model deepseek-chat --window 32000 --plot out/demo.png

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

# the real-clients conformance suite (Claude Code, Codex, aider, mini-swe-agent, SDK loops): docs/clients.md
clients: install
	PYTHON=$(BIN)/python bash tests/clients/run.sh

bench: install
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache
