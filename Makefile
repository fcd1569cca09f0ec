# The README's two commands: `make demo` (set up, then run the main job) and
# `make test` (set up, then run the test suite). Both are safe to re-run.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# The CPU build of PyTorch; a GPU host installs its CUDA build first (README).
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e '.[workload,notebook,dev]'
	touch $@

demo: setup
	$(BIN)/coursehub pendulum pipeline

test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
