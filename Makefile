# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed
CORES  ?= all

.PHONY: run test test-gpu lint env lock clean-results dryrun

env: $(STAMP)

# The venv is rebuilt only when the lock or the project metadata change.
# uv (pinned) installs the lock ~10x faster than pip; bytecode is compiled at install
# because this machine sets PYTHONDONTWRITEBYTECODE (import mlflow would otherwise cost ~5 s).
$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode --no-deps -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES)

# Snakemake report (tables, plots, provenance) of the last `make run`.
.PHONY: report
report: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --report results/report.html

# Scale benchmark (benchmarks/harness.py) through the pipeline: results/bench/, MLflow.
.PHONY: bench
bench: $(STAMP)
	rm -f results/bench/bench.md
	$(BIN)/snakemake bench --cores $(CORES)

dryrun: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) -n

test: $(STAMP)
	$(BIN)/python -m pytest -q

# GPU suite: on any CUDA 12 machine, installs the [gpu] extra and runs the tests marked gpu.
test-gpu: $(STAMP)
	$(BIN)/uv pip install -q --python $(BIN)/python "cupy-cuda12x[ctk]>=13"
	$(BIN)/python -m pytest -q -m gpu

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/snakemake --lint

# Re-resolve pinned versions after editing pyproject.toml dependencies.
lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean-results:
	rm -rf results/*
