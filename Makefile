# On a fresh machine with only Python 3.11+, each target sets up what it needs in .venv:
#   make install -- .venv with contextwarden (editable) and the dev tools
#   make demo    -- replay a real recorded session shipped with the project (no key, no network)
#   make test    -- the test suite (.ci/run runs it, then make lint)
#   make test-crewai -- the CrewAI hook's tests, in .venv-crewai (crewai needs openai<3, dev openai>=3)
#   make wheel   -- build dist/contextwarden-VERSION-py3-none-any.whl
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install demo test test-crewai lint bench clients wheel clean
install: $(BIN)/.installed

demo: install
	$(BIN)/contextwarden replay examples/data/demo-session.traj.json --model deepseek-v4-flash --window 32000 --plot out/demo.png

# bytecode written even where the environment says not to: the processes the tests start reuse it
test: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2

# crewai 1.x pins openai<3 and the dev set's Agents SDK needs openai>=3: its own venv, its tests only
CREWAI_VENV ?= .venv-crewai
$(CREWAI_VENV)/bin/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(CREWAI_VENV)
	$(CREWAI_VENV)/bin/pip install --quiet --upgrade pip
	$(CREWAI_VENV)/bin/pip install --quiet -e '.[crewai]' 'pytest>=8' 'pytest-asyncio>=0.23' 'hypothesis>=6.100'
	touch $@

test-crewai: $(CREWAI_VENV)/bin/.installed
	$(CREWAI_VENV)/bin/python -m pytest tests/integrations/test_crewai.py tests/integrations/test_docs.py

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
	rm -rf $(VENV) $(CREWAI_VENV) out dist build .pytest_cache .mypy_cache
