# Every target bootstraps .venv on first use; later runs reuse it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOCKET ?=
PYTEST_WORKERS ?= 2

.PHONY: serve test lint bench soak venv clean

venv: $(STAMP)

# The first-party integrations (plugins/cmux-{claude,codex,copilot,gemini,opencode,qwen}) are
# part of cmux-core itself; the uninstall drops the separate distributions an older .venv
# holds, whose entry points would name the same plugins twice.
BUNDLED := cmux-claude cmux-codex cmux-copilot cmux-gemini cmux-opencode cmux-qwen

$(STAMP): pyproject.toml plugins/cmux-views/pyproject.toml plugins/cmux-status-card/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip uninstall --quiet --yes $(BUNDLED) 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev,ghostty]'
	$(BIN)/python -m pip install --quiet -e plugins/cmux-views
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

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
