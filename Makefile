# Every target bootstraps .venv on first use; later runs reuse it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOCKET ?=
PYTEST_WORKERS ?= 2

.PHONY: serve test lint bench soak venv clean sshd record-latest

venv: $(STAMP)

# The first-party integrations (plugins/cmux-{claude,codex,copilot,gemini,opencode,qwen}) are
# part of cmux-core itself; the uninstall drops the separate distributions an older .venv
# holds, whose entry points would name the same plugins twice.
BUNDLED := cmux-claude cmux-codex cmux-copilot cmux-gemini cmux-opencode cmux-qwen

$(STAMP): pyproject.toml plugins/cmux-views/pyproject.toml plugins/cmux-status-card/pyproject.toml \
		plugins/cmux-mcp/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip uninstall --quiet --yes $(BUNDLED) 2>/dev/null || true
	$(BIN)/python -m pip install --quiet -e '.[dev,ghostty]'
	$(BIN)/python -m pip install --quiet -e plugins/cmux-views
	$(BIN)/python -m pip install --quiet -e plugins/cmux-status-card
	$(BIN)/python -m pip install --quiet -e plugins/cmux-mcp
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/cmux serve $(if $(SOCKET),--socket $(SOCKET)) $(SERVE_ARGS)

test: $(STAMP) sshd
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The fleet tests start their own OpenSSH sshd on 127.0.0.1: install it when missing (as
# root, with apt-get; RUNLEVEL=1 keeps the package from starting a system-wide sshd).
SSHD_BIN := $(firstword $(wildcard /usr/sbin/sshd /usr/local/sbin/sshd))
sshd:
ifeq ($(SSHD_BIN),)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing openssh-server for the fleet tests"; \
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
		apt-get install -y -qq --no-install-recommends openssh-server >/dev/null; \
	else echo "sshd is missing and cannot be installed here: the fleet tests will skip"; fi
endif

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
