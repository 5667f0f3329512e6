# On a fresh machine with only Python 3.11+, each target sets up what it needs in .venv:
#   make install -- .venv with contextwarden (editable) and the dev tools
#   make demo    -- replay a real recorded session shipped with the project (no key, no network)
#   make test    -- the test suite (.ci/run runs it, then make lint)
#   make wheel   -- build dist/contextwarden-VERSION-py3-none-any.whl
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install demo test lint bench clients wheel clean
install: $(BIN)/.installed

demo: install
	$(BIN)/contextwarden replay examples/data/demo-session.traj.json --model deepseek-v4-flash --window 32000 --plot out/demo.png

test: install
	$(BIN)/python -m pytest -n 2

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

wheel: install
	$(BIN)/pip wheel . --no-deps --quiet -w dist
	@ls dist/*.whl

clean:
	rm -rf $(VENV) out dist build .pytest_cache .mypy_cache
