# The README's two commands: `make demo` (set up, then run the main job) and
# `make test` (set up, then run the test suite). Both are safe to re-run.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# The CPU build of PyTorch; a GPU host installs its CUDA build first (README).
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test lint system-deps

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[workload,notebook,web,hub,dev]'
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@5
	touch $@

# Debian packages for the integration tests and the demo (as root): a real
# PostgreSQL server, Chromium for the browser tests, Node.js and npm for the
# proxy, git. Only what is missing is installed: a host whose Node.js comes
# from elsewhere (e.g. NodeSource, which bundles npm and conflicts with
# Debian's npm package) keeps it.
system-deps:
	@pkgs=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	command -v node >/dev/null || pkgs="$$pkgs nodejs"; \
	command -v npm >/dev/null || pkgs="$$pkgs npm"; \
	command -v git >/dev/null || pkgs="$$pkgs git"; \
	if [ -n "$$pkgs" ]; then \
		echo "installing:$$pkgs"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs; \
	else echo "system packages: all present"; fi

demo: setup
	$(BIN)/coursehub demo

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
