# Every target bootstraps .venv on first use; later runs reuse it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOCKET ?=
PYTEST_WORKERS ?= 2

.PHONY: serve test lint bench soak venv clean record-latest

venv: $(STAMP)

$(STAMP): pyproject.toml plugins/cmux-claude/pyproject.toml plugins/cmux-codex/pyproject.toml \
		plugins/cmux-gemini/pyproject.toml plugins/cmux-opencode/pyproject.toml \
		plugins/cmux-qwen/pyproject.toml plugins/cmux-status-card/pyproject.toml \
		plugins/cmux-copilot/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ghostty]'
	$(BIN)/python -m pip install --quiet -e plugins/cmux-views
	$(BIN)/python -m pip install --quiet -e plugins/cmux-claude
	$(BIN)/python -m pip install --quiet -e plugins/cmux-codex
	$(BIN)/python -m pip install --quiet -e plugins/cmux-gemini
	$(BIN)/python -m pip install --quiet -e plugins/cmux-opencode
	$(BIN)/python -m pip install --quiet -e plugins/cmux-qwen
	$(BIN)/python -m pip install --quiet -e plugins/cmux-copilot
	$(BIN)/python -m pip install --quiet -e plugins/cmux-status-card
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/cmux serve $(if $(SOCKET),--socket $(SOCKET)) $(SERVE_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check cmux_core tests bench plugins
	$(BIN)/mypy --strict cmux_core

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

soak: $(STAMP)
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

# Not part of test: installs each recorded agent's newest release from the npm registry
# and replays its recorded flows (tests/captured/record_latest.py).
record-latest: $(STAMP)
	$(BIN)/python tests/captured/record_latest.py $(RECORD_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
