# The README's two commands: `make demo` (set up, then run the main job) and
# `make test` (set up, then run the test suite). Both are safe to re-run.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Options of `coursehub demo`, e.g. make demo ARGS="--port 8100 --data-dir /srv/demo".
ARGS ?=
# PyTorch build: cpu (default, ~200 MB) or cuda (PyPI's Linux x86-64 wheel, a CUDA
# build of several GB). PyTorch's install selector (https://pytorch.org/get-started/locally/)
# gives the CPU build from its own index, https://download.pytorch.org/whl/cpu.
TORCH ?= cpu
TORCH_VERSION ?= 2.13.0
TORCH_INDEX_cpu := --index-url https://download.pytorch.org/whl/cpu
TORCH_INDEX_cuda :=
# pip's index options for torch; a site that installs from its own mirror gives its own
# (make setup TORCH_INDEX="--index-url https://mirror.example/whl/cpu"), or none at all
# (make setup TORCH_INDEX=) to use pip's configured index and find-links.
TORCH_INDEX ?= $(TORCH_INDEX_$(TORCH))
# Whether the torch in the venv is the build asked for (torch.version.cuda is None on CPU builds).
TORCH_IS_cpu := torch.version.cuda is None
TORCH_IS_cuda := torch.version.cuda is not None
ifeq ($(filter $(TORCH),cpu cuda),)
$(error TORCH must be cpu or cuda, got '$(TORCH)')
endif
# Keeps a torch of the asked build (offline: a venv that has it needs no index);
# replaces one of the other build.
TORCH_INSTALL = $(BIN)/python -c "import sys, torch; sys.exit(0 if $(TORCH_IS_$(TORCH)) else 1)" 2>/dev/null || { \
	$(BIN)/python -m pip uninstall -q -y torch 2>/dev/null; \
	$(BIN)/python -m pip install -q $(TORCH_INDEX) "torch==$(TORCH_VERSION)"; }

.PHONY: setup torch demo test lint system-deps labextension

setup: $(VENV)/.installed torch

# torch before the extras, so that `workload` finds it instead of pulling PyPI's CUDA build.
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(TORCH_INSTALL)
	$(BIN)/python -m pip install -q -e '.[workload,notebook,web,hub,dev,books]'
	# jupyter_events' jsonschema[format-nongpl] installs rfc3987-syntax, whose import builds
	# Earley parsers: ~0.7 s of CPU at every Jupyter start (python-jsonschema/jsonschema#1428).
	# No Jupyter schema uses the iri formats it checks (`coursehub doctor`: jupyter start).
	$(BIN)/python -m pip uninstall -q -y rfc3987-syntax
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@5
	touch $@

# Switch builds in an existing venv: make setup TORCH=cuda
torch: $(VENV)/.installed
	$(TORCH_INSTALL)

# Debian packages for the integration tests and the demo (as root): a real
# PostgreSQL server, Chromium for the browser tests, Node.js and npm for the
# proxy, git, acl (course data folders), btrfs-progs (home quotas on a loop-mounted
# btrfs, docs/homes.md), python3-venv, debootstrap and systemd-container (the
# `nspawn` tests boot a Debian 12 container). Only what is missing
# is installed: a host whose Node.js comes from elsewhere (NodeSource, nvm, a
# tarball; NodeSource bundles npm and conflicts with Debian's npm package)
# keeps it. DRY_RUN=1 only prints
# the apt-get command.
system-deps:
	@pkgs=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	command -v node >/dev/null || pkgs="$$pkgs nodejs"; \
	command -v npm >/dev/null || pkgs="$$pkgs npm"; \
	command -v git >/dev/null || pkgs="$$pkgs git"; \
	command -v setfacl >/dev/null || pkgs="$$pkgs acl"; \
	command -v mkfs.btrfs >/dev/null || [ -x /usr/sbin/mkfs.btrfs ] || pkgs="$$pkgs btrfs-progs"; \
	command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || pkgs="$$pkgs debootstrap"; \
	command -v systemd-nspawn >/dev/null || pkgs="$$pkgs systemd-container"; \
	$(PYTHON) -c "import ensurepip, venv" 2>/dev/null || pkgs="$$pkgs python3-venv"; \
	if [ -z "$$pkgs" ]; then echo "system packages: all present"; \
	elif [ -n "$(DRY_RUN)" ]; then echo "would run: apt-get install -y --no-install-recommends$$pkgs"; \
	else echo "installing:$$pkgs"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs; \
	fi

demo: setup
	$(BIN)/coursehub demo $(ARGS)

# Parallel test workers (pytest-xdist): most tests wait on subprocesses (hubs, kernels,
# PostgreSQL, Chromium), so 6 workers on 2 cores keep both busy; TEST_WORKERS=0 runs serially.
# Groups (a file, or every Slurm test) go out longest first (tests/suiteorder.py);
# make test PYTEST_ARGS=--store-durations refreshes their measured seconds.
TEST_WORKERS ?= 6
PYTEST_ARGS ?=
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=20 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# The exam clock's JupyterLab extension (labextension/, docs/exams.md): its built files under
# src/coursehub/examroom/labextensions/@coursehub/exam-clock are committed and installed by pip, so
# `make setup` needs no Node.js build. After a change to labextension/: make labextension,
# then commit the built files. npm ci installs the versions of labextension/package-lock.json;
# the build is @jupyterlab/builder's, against the JupyterLab of the venv.
LAB_CORE = $$($(CURDIR)/$(BIN)/python -c "import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), 'staging'))")
labextension: setup
	cd labextension && npm ci --silent --no-audit --no-fund --ignore-scripts
	rm -rf src/coursehub/examroom/labextensions/@coursehub/exam-clock
	cd labextension && node node_modules/@jupyterlab/builder/lib/build-labextension.js --core-path "$(LAB_CORE)" .
