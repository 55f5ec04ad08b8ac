# Two commands do all the set-up: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP  := $(VENV)/.installed
CORES  ?= all
# Config files to use instead of config.yaml, merged in order (`make run CONFIG="config.yaml
# config/papers.yaml"`). check-config reads them first: Snakemake reads --configfile files before
# the workflow runs, and a missing, empty or broken one would end in its traceback.
CONFIG ?=
SNAKEMAKE = $(if $(CONFIG),$(BIN)/python -m kernelscale.pipeline.cli check-config $(CONFIG) >/dev/null && )$(BIN)/snakemake
CONFIGFILE = $(if $(CONFIG),--configfile $(CONFIG))

.PHONY: run test test-gpu test-gpu-sim lint env lock clean-results dryrun

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
	$(SNAKEMAKE) --cores $(CORES) $(CONFIGFILE)

# Snakemake report (tables, plots, provenance) in results/report.html, of the last `make run`
# and, once `make reproduce` has left results/reproduce/verdicts.md, of its figures and verdicts
# too ("Reproduce"; `reproduce` alone when no `make run` has left results/tables/summary.csv).
# Snakemake reports only the targets it is given, and stops on a missing report() file.
REPORT_TARGETS = $(if $(wildcard results/reproduce/verdicts.md),$(if $(wildcard results/tables/summary.csv),all) reproduce)
.PHONY: report
report: $(STAMP)
	$(SNAKEMAKE) $(REPORT_TARGETS) --cores $(CORES) --report results/report.html $(CONFIGFILE)

# Scale benchmark (benchmarks/harness.py) through the pipeline: results/bench/, MLflow.
.PHONY: bench
bench: $(STAMP)
	rm -f results/bench/bench.md
	$(SNAKEMAKE) bench --cores $(CORES) $(CONFIGFILE)

# The seed papers' headline claims on ../shared/devdata (benchmarks/reproduce.py, settings in
# config/reproduce.yaml): results/reproduce/ (figures, verdicts.md), MLflow; `make report` then
# adds the figures to results/report.html.
.PHONY: reproduce
reproduce: $(STAMP)
	rm -f results/reproduce/verdicts.md
	$(SNAKEMAKE) reproduce --cores $(CORES) $(CONFIGFILE)

dryrun: $(STAMP)
	$(SNAKEMAKE) --cores $(CORES) -n $(CONFIGFILE)

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) test-gpu-sim

# GPU suite (tests/gpu: imports the library only). Runs under the first Python that already
# imports cupy (a GPU image's own, with zarr/dask on its path, or the venv); otherwise installs
# cupy for the driver's CUDA major (12 or 13, from nvidia-smi) into the venv. No registry is
# needed where cupy is already installed.
GPU_PYTHON ?= $(shell for p in $(BIN)/python python3; do $$p -c "import cupy" 2>/dev/null && { echo $$p; break; }; done)
test-gpu:
	@py="$(GPU_PYTHON)"; \
	if [ -z "$$py" ]; then \
	  $(MAKE) env || exit 1; \
	  cuda=$$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p'); \
	  [ "$$cuda" = 13 ] || cuda=12; \
	  $(BIN)/uv pip install -q --python $(BIN)/python "cupy-cuda$${cuda}x[ctk]" || exit 1; \
	  py=$(BIN)/python; \
	fi; \
	echo "test-gpu: $$py"; \
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $$py -m pytest -q -p no:cacheprovider tests/gpu

# The GPU suite against tests/gpu/fakecupy, a numpy stand-in that enforces cupy's host/device
# rules: catches numpy/cupy mix-ups on machines without a GPU (part of `make test`).
test-gpu-sim: $(STAMP)
	PYTHONPATH=tests/gpu/fakecupy $(BIN)/python -m pytest -q -p no:cacheprovider tests/gpu

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/snakemake --lint

# Re-resolve pinned versions after editing pyproject.toml dependencies.
lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean-results:
	rm -rf results/*
